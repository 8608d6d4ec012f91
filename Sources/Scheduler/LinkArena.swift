import CProcess

/// Singly linked lists of `Element` kept in one array, addressed by `Int32` links (-1: none),
/// with freed links reused: no allocation per list, and nothing to free per job. The core keeps
/// every job's dependencies and every job's dependents in two of these.
struct LinkArena<Element: Sendable>: Sendable {
    /// One link: its element and the next link of its list, or -1. (For a 12-byte element the
    /// link is 16 bytes: four to a cache line.)
    struct Link: Sendable {
        var element: Element
        var next: Int32
    }

    private var links: [Link] = []
    /// The first free link, or -1.
    private var free: Int32 = -1

    /// A new link holding `element`, not yet in a list (its `next` is -1).
    mutating func make(_ element: Element) -> Int32 {
        if free >= 0 {
            let link = free
            free = links[Int(link)].next
            links[Int(link)] = Link(element: element, next: -1)
            return link
        }
        links.append(Link(element: element, next: -1))
        return Int32(links.count - 1)
    }

    /// The element at `link`.
    func element(_ link: Int32) -> Element { links[Int(link)].element }

    /// The link after `link`, or -1.
    func next(_ link: Int32) -> Int32 { links[Int(link)].next }

    /// Makes `next` follow `link` in its list.
    mutating func link(_ link: Int32, to next: Int32) { links[Int(link)].next = next }

    /// The elements of the list that starts at `first`, in order.
    func elements(from first: Int32) -> [Element] {
        var result: [Element] = []
        var link = first
        while link >= 0 {
            result.append(links[Int(link)].element)
            link = links[Int(link)].next
        }
        return result
    }

    /// Makes a list of `elements`; returns its first link (-1 for none).
    mutating func makeList(_ elements: some Sequence<Element>) -> Int32 {
        var first: Int32 = -1
        var previous: Int32 = -1
        for element in elements {
            let link = make(element)
            if previous >= 0 { self.link(previous, to: link) } else { first = link }
            previous = link
        }
        return first
    }

    /// Gives the links of the list that starts at `first` back for reuse.
    mutating func freeList(from first: Int32) {
        var link = first
        while link >= 0 {
            let next = links[Int(link)].next
            links[Int(link)].next = free
            free = link
            link = next
        }
    }

    /// Makes room for `extra` more links at once, growing at least twofold (a reserve of exactly
    /// what is asked, submission after submission, would copy the array each time).
    mutating func reserve(_ extra: Int) {
        let needed = links.count + extra
        if needed > links.capacity { links.reserveCapacity(max(needed, links.capacity * 2)) }
    }

    /// Asks the CPU for the link at `link` (a hint; nothing is read).
    func prefetch(_ link: Int32) {
        guard link >= 0 else { return }
        links.withUnsafeBufferPointer { jt_prefetch($0.baseAddress! + Int(link), MemoryLayout<Link>.stride) }
    }
}
