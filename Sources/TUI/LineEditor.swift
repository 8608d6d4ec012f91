/// A one-line text field: insert at the cursor, ←/→, Home/End, Backspace, Delete, Ctrl-U.
struct LineEditor: Equatable, Sendable {
    private(set) var characters: [Character]
    /// The cursor, 0...characters.count.
    private(set) var cursor: Int
    /// Whether the whole text is selected (a default value): the first character typed
    /// replaces it, Backspace clears it, a movement keeps it.
    private(set) var isSelected: Bool

    /// - Parameters:
    ///   - text: The text to start with.
    ///   - selected: Whether it is a default that typing replaces.
    init(_ text: String = "", selected: Bool = false) {
        characters = Array(text)
        cursor = characters.count
        isSelected = selected && !text.isEmpty
    }

    /// The text.
    var text: String { String(characters) }

    /// Applies an editing key; returns whether the key was one.
    @discardableResult
    mutating func handle(_ key: Key) -> Bool {
        if isSelected {
            isSelected = false
            switch key {
            case .char, .backspace, .delete, .control("h"), .control("d"), .control("u"), .control("k"):
                characters = []
                cursor = 0
                if case .char = key { break }
                return true
            default: break
            }
        }
        switch key {
        case .char(let character):
            characters.insert(character, at: cursor)
            cursor += 1
        case .left: cursor = max(0, cursor - 1)
        case .right: cursor = min(characters.count, cursor + 1)
        case .home, .control("a"): cursor = 0
        case .end, .control("e"): cursor = characters.count
        case .backspace, .control("h"):
            guard cursor > 0 else { return true }
            characters.remove(at: cursor - 1)
            cursor -= 1
        case .delete, .control("d"):
            guard cursor < characters.count else { return true }
            characters.remove(at: cursor)
        case .control("u"):
            characters.removeFirst(cursor)
            cursor = 0
        case .control("k"):
            characters.removeLast(characters.count - cursor)
        default:
            return false
        }
        return true
    }

    /// What shows in a field `width` cells wide, and where the cursor is in it: the text
    /// scrolls so that the cursor stays visible.
    func visible(width: Int) -> (text: String, cursorColumn: Int) {
        guard width > 1 else { return ("", 0) }
        var start = 0
        func cells(_ range: Range<Int>) -> Int { characters[range].reduce(0) { $0 + TextWidth.width(String($1)) } }
        while cells(start..<cursor) > width - 1 { start += 1 }
        var shown = ""
        var used = 0
        for character in characters[start...] {
            let w = TextWidth.width(String(character))
            if used + w > width { break }
            shown.append(character)
            used += w
        }
        return (shown, cells(start..<cursor))
    }
}
