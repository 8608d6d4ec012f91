#if canImport(Glibc)
import Glibc
#endif

/// File descriptors an I/O thread keeps in hand for the rest of the process, and gives back
/// when the process runs out.
///
/// A process with no free descriptor is not only unable to spawn: on Linux, libdispatch (under
/// Swift's cooperative pool) checks its worker threads once a second by opening
/// `/proc/<tid>/stat`, and crashes the process (SIGILL, "workq: registered worker exited
/// prematurely") when that open fails while work is queued. So the reactor never takes the
/// last descriptors for its jobs: it spawns only while it holds its reserve, and the moment a
/// spawn lacks descriptors, or leaves none free, it closes the reserve, which leaves
/// ``size`` free for everything else (libdispatch, sockets, the log, the store). It takes the
/// reserve back before its next spawn, which waits until it can.
///
/// Touched by its I/O thread only.
struct DescriptorReserve {
    /// How many descriptors one I/O thread keeps.
    static let size = 16

    /// What the reserve's descriptors duplicate (the thread's eventfd: never read through them).
    private let source: Int32
    private var held: [Int32] = []

    init(duplicating source: Int32) {
        self.source = source
        held.reserveCapacity(Self.size)
        _ = take()
    }

    /// Whether the whole reserve is in hand.
    var isHeld: Bool { held.count == Self.size }

    /// Takes the reserve back (if given back) and says whether a spawn may go ahead: the whole
    /// reserve is in hand and, when it had to be taken back now, at least one more descriptor is
    /// free beyond it. When it cannot, it holds none.
    mutating func take() -> Bool {
        if isHeld { return true }
        while held.count < Self.size {
            let descriptor = fcntl(source, F_DUPFD_CLOEXEC, 0)
            guard descriptor >= 0 else {
                release()
                return false
            }
            held.append(descriptor)
        }
        guard hasFreeDescriptor() else {
            release()
            return false
        }
        return true
    }

    /// After a spawn: when it took the last free descriptor, the reserve goes back to the process.
    mutating func checkAfterSpawn() {
        if isHeld && !hasFreeDescriptor() { release() }
    }

    /// Closes the reserve: its descriptors are free for the rest of the process.
    mutating func release() {
        for descriptor in held { close(descriptor) }
        held.removeAll(keepingCapacity: true)
    }

    private func hasFreeDescriptor() -> Bool {
        let probe = fcntl(source, F_DUPFD_CLOEXEC, 0)
        guard probe >= 0 else { return false }
        close(probe)
        return true
    }
}
