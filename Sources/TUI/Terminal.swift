/// A key the user pressed, decoded from the terminal.
enum Key: Hashable, Sendable {
    /// A printable character.
    case char(Character)
    /// A control character: `.control("c")` is Ctrl-C.
    case control(Character)
    case enter, escape, backspace, delete, tab
    case up, down, left, right, pageUp, pageDown, home, end
    /// F1...F12.
    case function(Int)
    /// The terminal changed size.
    case resize
    /// A click or a turn of the wheel.
    case mouse(MouseEvent)
    /// Text the user pasted (the terminal marked it): goes into a prompt, never read as keys.
    case paste(String)
}

/// A mouse event at a cell (rows and columns from 0).
struct MouseEvent: Hashable, Sendable {
    enum Kind: Hashable, Sendable { case click, wheelUp, wheelDown }
    var kind: Kind
    var row: Int
    var column: Int
}

/// What a piece of text on screen means; the terminal maps it to colors or attributes.
enum Role: Hashable, Sendable, CaseIterable {
    case normal, title, dim, tableHeader, selected
    case running, queued, waiting, succeeded, failed, cancelled, blocked, skipped
    case paused, footerKey, footerLabel, prompt, message, error, panelTitle
    case progressFill, progressEmpty
}

/// A run of text drawn in one role.
struct Segment: Equatable, Sendable {
    var text: String
    var role: Role

    init(_ text: String, _ role: Role = .normal) {
        self.text = text
        self.role = role
    }
}

/// One screen row: segments whose display widths add up to the screen width.
struct ScreenLine: Equatable, Sendable {
    var segments: [Segment]

    init(_ segments: [Segment] = []) { self.segments = segments }

    /// The row as plain text.
    var text: String { segments.map(\.text).joined() }
}

/// A row and column on screen, from 0.
struct ScreenPosition: Equatable, Sendable {
    var row: Int
    var column: Int
}

/// Everything one redraw puts on screen.
struct Frame: Equatable, Sendable {
    /// Exactly one line per screen row.
    var lines: [ScreenLine]
    /// Where the cursor shows (a prompt), or `nil` to hide it.
    var cursor: ScreenPosition?
}

/// The size of the terminal in cells.
struct TerminalSize: Equatable, Sendable {
    var rows: Int
    var columns: Int
}

/// The screen and keyboard. ``NcursesTerminal`` is the one real implementation and the only
/// code that calls ncurses; tests script keys and sizes and capture the frames instead.
@MainActor
protocol Terminal: AnyObject {
    /// The current size.
    var size: TerminalSize { get }
    /// Replaces the screen's content with `frame` (only the differences reach the terminal).
    func draw(_ frame: Frame)
    /// The next key already typed, or `nil` when there is none; never waits.
    func readKey() -> Key?
    /// Re-reads the size from the kernel after a resize signal.
    func updateSize()
    /// From now on calls `onInput` whenever typed keys may be waiting (the caller then reads
    /// them with ``readKey()`` until there are none). Nothing polls: the real terminal wakes on
    /// its input becoming readable.
    func watchInput(_ onInput: @escaping @MainActor @Sendable () -> Void)
    /// Whether the input is gone for good (the terminal closed): no key will ever come.
    var isInputClosed: Bool { get }
    /// Gives the terminal back as it was; stops watching the input. Called on every way out.
    func close()
    /// Stops the program as a shell job (Ctrl-Z) and returns once it is continued (`fg`).
    func suspend()
}
