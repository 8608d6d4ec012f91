import CNcurses
import CProcess
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The real terminal, through wide-character ncurses: the only code that calls it.
///
/// Everything runs on the main actor (ncurses is not thread-safe). Keys are read in no-delay
/// mode, so ``readKey()`` never waits; a read source on stdin says when there are some.
/// Signals are not its business: whoever runs the dashboard watches them and hands them over.
@MainActor
final class NcursesTerminal: Terminal {
    /// How colors are drawn.
    enum ColorMode: Equatable {
        case colors256, colors8, monochrome
    }

    private(set) var size: TerminalSize
    let colorMode: ColorMode
    private var styles: [Role: (attributes: attr_t, pair: Int16)] = [:]
    private var isOpen = true
    private var cursorShown = false
    /// Wakes the dashboard when stdin has keys to read.
    private var inputSource: (any DispatchSourceRead)?
    /// While jobtop runs in the background and could not be stopped there (see
    /// ``waitForForeground(then:)``): the check that resumes the input once it is in front.
    private var foregroundCheck: DispatchWorkItem?
    /// The text of a bracketed paste read so far (`nil`: not in one). A paste read in several
    /// drains goes on where the last left off.
    private var pasted: String?

    /// Why the terminal on stdout cannot show the dashboard (`TERM=dumb draws everything on
    /// one line`), or `nil` when it can. Takes nothing over.
    static func usabilityProblem() -> String? {
        let name = getenv("TERM").map { String(cString: $0) } ?? ""
        if name.isEmpty { return "TERM is not set" }
        if cn_terminal_is_usable() == 0 { return "TERM=\(name) cannot move the cursor" }
        return nil
    }

    /// Takes over the terminal, or returns `nil` (with the reason) when it cannot be used.
    static func open() -> Result<NcursesTerminal, TerminalError> {
        prepareLocale()
        // Started as a background shell job (`jobtop jobs.toml &`): stopped until `fg`, as the
        // terminal stops any job that uses it from the background, before anything is drawn
        // over the shell's screen.
        waitUntilInForeground()
        // The modes the user's shell left the terminal in, for the crash guard to put back if
        // jobtop crashes while the dashboard has the terminal (ncurses saves them too, but a
        // signal handler cannot call endwin).
        let captured = jt_crash_guard_capture_terminal(STDOUT_FILENO) == 0
        guard cn_newterm() != nil else {
            return .failure(TerminalError(message: "cannot use the terminal (TERM=\(getenv("TERM").map { String(cString: $0) } ?? "unset"))"))
        }
        let terminal = NcursesTerminal()
        if captured {
            let reset = resetSequence()
            _ = reset.withUnsafeBufferPointer { jt_crash_guard_arm_terminal($0.baseAddress, $0.count) }
        }
        // Anything written to stderr while the screen is drawn would garble it, then vanish
        // with the alternate screen: it is kept and shown when the terminal is given back.
        _ = jt_crash_guard_capture_stderr()
        return .success(terminal)
    }

    /// The bytes that take this terminal out of the dashboard's full-screen mode, from its
    /// terminfo entry: attributes off, the cursor shown, the keypad's normal mode, then back to
    /// the normal screen (or, without one, a cleared screen). Prepared in advance for the crash
    /// guard, which cannot ask ncurses from a signal handler.
    static func resetSequence() -> [CChar] {
        func capability(_ name: String) -> [CChar] {
            // NULL: the terminal has no such capability; -1: not a string capability.
            guard let value = tigetstr(name), Int(bitPattern: value) != -1 else { return [] }
            let length = strlen(value)
            return stripPadding(Array(UnsafeBufferPointer(start: value, count: length)))
        }
        let leave = capability("rmcup")
        // Mouse reporting off (X10/normal, button-event and SGR modes): not a terminfo string.
        // And bracketed paste off (the dashboard turns it on).
        let mouseOff = Array("\u{1b}[?1000l\u{1b}[?1002l\u{1b}[?1006l\u{1b}[?2004l".utf8CString.dropLast())
        return capability("sgr0") + capability("cnorm") + capability("rmkx") + mouseOff + (leave.isEmpty ? capability("clear") : leave)
    }

    /// A terminfo string without its padding (`$<5>`, `$<2*/>`): tputs waits for those, they
    /// are not meant for the terminal.
    static func stripPadding(_ bytes: [CChar]) -> [CChar] {
        var result: [CChar] = []
        var index = 0
        while index < bytes.count {
            if bytes[index] == 0x24, index + 1 < bytes.count, bytes[index + 1] == 0x3C,
                let close = bytes[(index + 2)...].firstIndex(of: 0x3E) {
                index = close + 1
                continue
            }
            result.append(bytes[index])
            index += 1
        }
        return result
    }

    /// The locale must be set before ncurses starts, and it must be UTF-8: under `C`, every
    /// non-ASCII character would silently vanish.
    static func prepareLocale() {
        _ = setlocale(LC_ALL, "")
        let codeset = String(cString: cn_codeset())
        if codeset.uppercased().replacingOccurrences(of: "-", with: "") != "UTF8" {
            if setlocale(LC_CTYPE, "C.UTF-8") == nil { _ = setlocale(LC_CTYPE, "en_US.UTF-8") }
        }
    }

    private init() {
        raw()
        noecho()
        nonl()
        keypad(cn_stdscr(), true)
        nodelay(cn_stdscr(), true)
        // Clicks and the wheel (as htop: Shift with the mouse still selects text).
        cn_mouse_enable()
        // A lone Esc is told from the start of an escape sequence by this pause (ms): 25 unless
        // the user set ESCDELAY, as for any ncurses program (a slow link may split a sequence).
        if getenv("ESCDELAY") == nil { set_escdelay(25) }
        // Bracketed paste: the terminal marks pasted text (ESC [200~ … ESC [201~), which then
        // goes into a prompt as text; unmarked, a pasted line's newline submitted the prompt and
        // the rest ran as the dashboard's keys (c cancels, r retries…).
        Self.writeRaw("\u{1b}[?2004h")
        curs_set(0)
        size = TerminalSize(rows: Int(cn_lines()), columns: Int(cn_cols()))
        colorMode = Self.setUpColors()
        styles = Self.styles(for: colorMode)
    }

    /// Gives the terminal back: the screen the user had before, cursor and modes restored.
    func close() {
        guard isOpen else { return }
        isOpen = false
        foregroundCheck?.cancel()
        // Suspended while a check is due: resumed first (a suspended source must not be let go).
        if foregroundCheck != nil { inputSource?.resume() }
        foregroundCheck = nil
        inputSource?.cancel()
        inputSource = nil
        jt_crash_guard_disarm_terminal()
        curs_set(1)
        endwin()
        // The modes from before the dashboard, whatever ncurses took for the shell's when it
        // resumed from a stop (it takes them again then: a shell that put back raw modes for
        // the job would leave raw output after endwin).
        _ = jt_crash_guard_restore_terminal_modes()
        Self.writeRaw("\u{1b}[?2004l")
        jt_crash_guard_release_stderr()
    }

    func draw(_ frame: Frame) {
        guard isOpen else { return }
        // Put in the background (`bg` after Ctrl-Z): stopped again, as any program that draws
        // on the terminal from there is; nothing is drawn over the shell meanwhile.
        guard holdUntilForeground(SIGTTOU) else { return }
        let screen = cn_stdscr()
        werase(screen)
        for (row, line) in frame.lines.enumerated() where row < size.rows {
            wmove(screen, Int32(row), 0)
            for segment in line.segments where !segment.text.isEmpty {
                let style = styles[segment.role] ?? (cn_a_normal(), 0)
                cn_set_attributes(style.attributes, style.pair)
                var characters = segment.text.unicodeScalars.map { wchar_t(bitPattern: $0.value) }
                characters.append(0)
                _ = waddnwstr(screen, characters, Int32(characters.count - 1))
            }
        }
        cn_set_attributes(cn_a_normal(), 0)
        if let cursor = frame.cursor {
            if !cursorShown { curs_set(1) }
            cursorShown = true
            wmove(screen, Int32(cursor.row), Int32(cursor.column))
        } else if cursorShown {
            curs_set(0)
            cursorShown = false
        }
        wnoutrefresh(screen)
        doupdate()
    }

    func readKey() -> Key? {
        guard isOpen else { return nil }
        while true {
            guard let (isFunction, code) = nextCode() else { return nil }
            if pasted != nil {
                // Inside a paste everything is text, up to the closing marker.
                if !isFunction && code == 27 {
                    if readSequence() == "[201~" {
                        let text = pasted ?? ""
                        pasted = nil
                        return .paste(text)
                    }
                } else if !isFunction, let scalar = Unicode.Scalar(UInt32(bitPattern: code)) {
                    pasted?.unicodeScalars.append(scalar)
                }
                continue
            }
            if !isFunction && code == 27 {
                // Esc alone, or a sequence ncurses does not know for this TERM (tmux's Home is
                // ESC [1~ where xterm's terminfo says ESC OH): known ones are keys, the rest are
                // skipped whole (their tail ran as keys, and the Esc closed a prompt).
                guard let sequence = readSequence() else { return .escape }
                if sequence == "[200~" {
                    pasted = ""
                    continue
                }
                if let key = Self.sequenceKey(sequence) { return key }
                continue
            }
            let key = isFunction ? Self.functionKey(code) : Self.textKey(code)
            // Keys we do not know are skipped rather than ending the drain.
            if let key { return key }
        }
    }

    /// The next code from ncurses, and whether it is a function key; `nil` when none waits.
    private func nextCode() -> (isFunction: Bool, code: Int32)? {
        var character: wint_t = 0
        let result = wget_wch(cn_stdscr(), &character)
        if result == ERR { return nil }
        return (result == KEY_CODE_YES, Int32(bitPattern: character))
    }

    /// After an Esc: the rest of an escape sequence (`[1~`, `OH`), read at once (a sequence
    /// arrives whole); `nil` for an Esc on its own, whose next key (Alt with a key) is put back.
    private func readSequence() -> String? {
        guard let (isFunction, code) = nextCode() else { return nil }
        guard !isFunction, code == 0x5B || code == 0x4F else {
            if isFunction { _ = ungetch(code) } else { _ = unget_wch(wchar_t(code)) }
            return nil
        }
        var sequence = String(UnicodeScalar(UInt8(code)))
        if code == 0x4F {
            if let (_, last) = nextCode(), let scalar = Unicode.Scalar(UInt32(bitPattern: last)) { sequence.unicodeScalars.append(scalar) }
            return sequence
        }
        // A control sequence: parameter and intermediate bytes, then one final byte.
        while let (isFunction, next) = nextCode(), !isFunction, let scalar = Unicode.Scalar(UInt32(bitPattern: next)) {
            sequence.unicodeScalars.append(scalar)
            if (0x40...0x7E).contains(next) { break }
        }
        return sequence
    }

    /// The key an escape sequence ncurses did not map stands for, as terminals send them.
    static func sequenceKey(_ sequence: String) -> Key? {
        switch sequence {
        case "[1~", "[7~", "[H", "OH": .home
        case "[4~", "[8~", "[F", "OF": .end
        case "[3~": .delete
        case "[5~": .pageUp
        case "[6~": .pageDown
        case "[A", "OA": .up
        case "[B", "OB": .down
        case "[C", "OC": .right
        case "[D", "OD": .left
        default: nil
        }
    }

    /// Stops jobtop as a shell job (Ctrl-Z): the terminal given back as endwin leaves it (the
    /// shell's modes, the normal screen, bracketed paste off), the group stopped as the terminal
    /// would stop it (a `cat list | jobtop` pipeline stops whole), and the terminal taken again
    /// once jobtop is continued in front (`fg`; after `bg` it stops again, see
    /// ``holdUntilForeground(_:)``).
    func suspend() {
        release()
        if jt_stop_as_job(SIGTSTP) == 1, !Self.isInBackground { takeTerminalBack() }
        // Continued in the background (`bg`): stopped again the next time it draws or reads.
    }

    /// Whether the terminal was given back (endwin) for a stop and not taken again yet.
    private var isReleased = false

    /// Gives the terminal back to the shell: its modes, the normal screen, no bracketed paste.
    private func release() {
        guard !isReleased else { return }
        isReleased = true
        def_prog_mode()
        endwin()
        Self.writeRaw("\u{1b}[?2004l")
    }

    /// Back from a stop: ncurses' modes and bracketed paste again, and the whole screen redrawn
    /// (a SIGWINCH to itself: the dashboard's relayout, which also reads a size changed meanwhile).
    private func takeTerminalBack() {
        guard isReleased else { return }
        isReleased = false
        reset_prog_mode()
        Self.writeRaw("\u{1b}[?2004h")
        clearok(cn_stdscr(), true)
        doupdate()
        kill(getpid(), SIGWINCH)
    }

    /// In the background (`jobtop … &`, or `bg` after Ctrl-Z), a program that draws on the
    /// terminal or reads from it is stopped until `fg`: the terminal is given back, the group
    /// stopped with `signal` (SIGTTOU, SIGTTIN), and the terminal taken again once in front.
    ///
    /// - Returns: Whether jobtop has the terminal: `false` while it stays in the background
    ///   without being stopped (an orphaned process group, which the kernel never stops).
    private func holdUntilForeground(_ signal: Int32) -> Bool {
        if Self.isInBackground {
            release()
            while Self.isInBackground, jt_stop_as_job(signal) == 1 {}
            if Self.isInBackground { return false }
        }
        takeTerminalBack()
        return true
    }

    /// Writes `text` to the terminal, around ncurses (a mode it has no capability for).
    private static func writeRaw(_ text: String) {
        _ = Array(text.utf8).withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress, $0.count) }
    }

    func updateSize() {
        var rows: Int32 = 0
        var columns: Int32 = 0
        if cn_window_size(STDOUT_FILENO, &rows, &columns) == 0, rows > 0, columns > 0 {
            resize_term(rows, columns)
        }
        size = TerminalSize(rows: Int(cn_lines()), columns: Int(cn_cols()))
        clearok(cn_stdscr(), true)
    }

    // MARK: - Input

    func watchInput(_ onInput: @escaping @MainActor @Sendable () -> Void) {
        inputSource?.cancel()
        let source = DispatchSource.makeReadSource(fileDescriptor: STDIN_FILENO, queue: .main)
        source.setEventHandler { [weak self] in
            MainActor.assumeIsolated {
                // Input pending while in the background is the shell's: a read gets EIO, and
                // the source fires again at once (a core spun, and `q` was never read).
                if let self, Self.isInBackground || self.isReleased {
                    self.waitForForeground(then: onInput)
                    return
                }
                onInput()
            }
        }
        source.resume()
        inputSource = source
    }

    /// Stops the group with SIGTTOU while jobtop is a background job, until `fg` (or at once
    /// where the kernel will not stop it: then after at most 200 ms, once, on the caller's
    /// thread). Signals and a terminal query only: any thread.
    nonisolated static func waitUntilInForeground() {
        while isInBackground, jt_stop_as_job(SIGTTOU) == 1 {}
    }

    /// Whether jobtop's process group is not the terminal's foreground one (a background shell
    /// job). Asked of stdout, the dashboard's terminal (stdin may be a piped list).
    private nonisolated static var isInBackground: Bool {
        let foreground = tcgetpgrp(STDOUT_FILENO)
        return foreground > 0 && foreground != getpgrp()
    }

    /// Keys typed while in the background: stopped until `fg`; if that cannot be, the input is
    /// not watched (nothing spins on it) and is looked at again every second until jobtop is in
    /// front.
    private func waitForForeground(then onInput: @escaping @MainActor @Sendable () -> Void) {
        guard foregroundCheck == nil else { return }
        if holdUntilForeground(SIGTTIN) {
            onInput()
            return
        }
        inputSource?.suspend()
        scheduleForegroundCheck()
    }

    /// Looks again in a second whether jobtop is in front (the input's source is suspended
    /// meanwhile); resumes the input and has the screen redrawn once it is.
    private func scheduleForegroundCheck() {
        let check = DispatchWorkItem { [weak self] in
            MainActor.assumeIsolated {
                guard let self, self.isOpen else { return }
                guard self.holdUntilForeground(SIGTTIN) else { return self.scheduleForegroundCheck() }
                self.foregroundCheck = nil
                self.inputSource?.resume()
            }
        }
        foregroundCheck = check
        DispatchQueue.main.asyncAfter(deadline: .now() + 1, execute: check)
    }

    var isInputClosed: Bool {
        var descriptor = pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, 0) == 1 else { return false }
        return descriptor.revents & Int16(POLLHUP | POLLNVAL) != 0
    }

    // MARK: - Keys

    private static func textKey(_ code: Int32) -> Key? {
        switch code {
        case 10, 13: return .enter
        case 27: return .escape
        case 8, 127: return .backspace
        case 9: return .tab
        case 1...26: return .control(Character(Unicode.Scalar(UInt8(code) + 96)))
        case 0..<32: return nil
        default:
            guard let scalar = Unicode.Scalar(UInt32(code)) else { return nil }
            return .char(Character(scalar))
        }
    }

    private static func functionKey(_ code: Int32) -> Key? {
        switch code {
        case KEY_UP: return .up
        case KEY_DOWN: return .down
        case KEY_LEFT: return .left
        case KEY_RIGHT: return .right
        case KEY_PPAGE: return .pageUp
        case KEY_NPAGE: return .pageDown
        case KEY_HOME: return .home
        case KEY_END: return .end
        case KEY_BACKSPACE: return .backspace
        case KEY_DC: return .delete
        case KEY_ENTER: return .enter
        case KEY_BTAB: return .tab
        case KEY_RESIZE: return .resize
        case cn_key_mouse():
            var row: Int32 = 0
            var column: Int32 = 0
            switch cn_mouse_read(&row, &column) {
            case 1: return .mouse(MouseEvent(kind: .click, row: Int(row), column: Int(column)))
            case 2: return .mouse(MouseEvent(kind: .wheelUp, row: Int(row), column: Int(column)))
            case 3: return .mouse(MouseEvent(kind: .wheelDown, row: Int(row), column: Int(column)))
            default: return nil
            }
        case cn_key_f(1)...cn_key_f(12): return .function(Int(code - cn_key_f(0)))
        default: return nil
        }
    }

    // MARK: - Colors

    private static func setUpColors() -> ColorMode {
        if let noColor = getenv("NO_COLOR"), noColor.pointee != 0 { return .monochrome }
        guard has_colors() else { return .monochrome }
        start_color()
        use_default_colors()
        return cn_colors() >= 256 ? .colors256 : (cn_colors() >= 8 ? .colors8 : .monochrome)
    }

    /// The look of each role: colors when there are some, attributes alone otherwise.
    private static func styles(for mode: ColorMode) -> [Role: (attributes: attr_t, pair: Int16)] {
        let bold = cn_a_bold(), reverse = cn_a_reverse(), dim = cn_a_dim(), underline = cn_a_underline()
        let normal = cn_a_normal()
        if mode == .monochrome {
            let table: [Role: attr_t] = [
                .normal: normal, .title: reverse | bold, .dim: dim, .tableHeader: reverse, .selected: reverse | bold,
                .running: bold, .queued: normal, .waiting: underline, .succeeded: normal, .failed: bold | underline,
                .cancelled: dim, .blocked: dim, .skipped: dim | underline, .paused: reverse | bold, .footerKey: bold, .footerLabel: reverse, .prompt: bold | reverse,
                .message: bold, .error: bold | underline, .panelTitle: reverse, .progressFill: bold, .progressEmpty: dim,
            ]
            return table.mapValues { ($0, 0) }
        }
        let is256 = mode == .colors256
        // (foreground, background, attributes); -1 is the terminal's default color.
        let black: Int16 = 0, red: Int16 = 1, green: Int16 = 2, yellow: Int16 = 3, blue: Int16 = 4
        let magenta: Int16 = 5, cyan: Int16 = 6, white: Int16 = 7
        let gray: Int16 = is256 ? 245 : white
        let specs: [(Role, Int16, Int16, attr_t)] = [
            (.normal, -1, -1, normal),
            (.title, black, cyan, bold),
            (.dim, is256 ? 244 : -1, -1, is256 ? normal : dim),
            (.tableHeader, black, green, normal),
            (.selected, black, cyan, normal),
            (.running, is256 ? 114 : green, -1, bold),
            (.queued, is256 ? 75 : cyan, -1, normal),
            (.waiting, is256 ? 179 : yellow, -1, normal),
            (.succeeded, is256 ? 108 : green, -1, normal),
            (.failed, is256 ? 203 : red, -1, bold),
            (.cancelled, is256 ? 176 : magenta, -1, normal),
            (.blocked, is256 ? 140 : blue, -1, normal),
            (.skipped, is256 ? 173 : red, -1, normal),
            (.paused, black, yellow, bold),
            (.footerKey, -1, -1, bold),
            (.footerLabel, black, cyan, normal),
            (.prompt, black, yellow, normal),
            (.message, is256 ? 81 : cyan, -1, normal),
            (.error, is256 ? 203 : red, -1, bold),
            (.panelTitle, black, is256 ? 110 : blue, normal),
            (.progressFill, is256 ? 114 : green, -1, normal),
            (.progressEmpty, gray, -1, is256 ? normal : dim),
        ]
        var result: [Role: (attributes: attr_t, pair: Int16)] = [:]
        for (index, spec) in specs.enumerated() {
            let pair = Int16(index + 1)
            init_pair(pair, spec.1, spec.2)
            result[spec.0] = (spec.3, pair)
        }
        return result
    }
}

/// The terminal could not be used.
struct TerminalError: Error, Sendable, CustomStringConvertible {
    let message: String
    var description: String { message }
}
