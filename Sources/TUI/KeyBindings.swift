/// What a key does on the job table.
enum TableAction: Hashable, Sendable, CaseIterable {
    case moveUp, moveDown, pageUp, pageDown, moveToTop, moveToBottom
    case showOutput, enqueue, cancel, raisePriority, lowerPriority, retry, togglePause
    case fewerSlots, moreSlots, filter, cycleSort, help, quit, interrupt
    case toggleGroupPause, setGroupLimit, shutdownServe, toggleFollow, toggleTag, untagAll, setPriority, saveOutput, eventsView, timeline
    case signal, editCommand, repaint
}

/// One entry of the key table: the keys, how help shows them, and what they do.
struct KeyBinding: Sendable {
    /// The keys that trigger it.
    var keys: [Key]
    /// The keys as help shows them.
    var label: String
    /// What it does, for help.
    var summary: String
    /// The action.
    var action: TableAction
    /// The short label in the footer, if it has one there.
    var footer: (key: String, label: String)?
}

/// The dashboard's keys, in one place: the table decides, help and the footer show it.
enum KeyBindings {
    /// Every binding of the job table, in the order help lists them.
    static let table: [KeyBinding] = [
        KeyBinding(keys: [.up, .char("k")], label: "↑ k", summary: "select the previous job", action: .moveUp),
        KeyBinding(keys: [.down, .char("j")], label: "↓ j", summary: "select the next job", action: .moveDown),
        KeyBinding(keys: [.pageUp], label: "PgUp", summary: "one page up", action: .pageUp),
        KeyBinding(keys: [.pageDown], label: "PgDn", summary: "one page down", action: .pageDown),
        KeyBinding(keys: [.home, .char("g")], label: "Home g", summary: "first job", action: .moveToTop),
        KeyBinding(keys: [.end, .char("G")], label: "End G", summary: "last job", action: .moveToBottom),
        KeyBinding(keys: [.char("F")], label: "F", summary: "follow the selected job as it moves (again: the cursor keeps its row)",
                   action: .toggleFollow),
        KeyBinding(keys: [.char(" ")], label: "Space", summary: "tag / untag the selected job (c + - r then act on every tagged job)",
                   action: .toggleTag),
        KeyBinding(keys: [.char("U")], label: "U", summary: "untag every job", action: .untagAll),
        KeyBinding(keys: [.enter], label: "Enter", summary: "show the job's output (Esc/q returns)", action: .showOutput,
                   footer: ("Enter", "Output")),
        KeyBinding(keys: [.char("n")], label: "n", summary: "enqueue a shell command (Tab: priority; @group after:a,b first)", action: .enqueue,
                   footer: ("n", "New")),
        KeyBinding(keys: [.char("c"), .function(9)], label: "c F9", summary: "cancel the selected job (asks y/n)",
                   action: .cancel, footer: ("c", "Cancel")),
        KeyBinding(keys: [.char("e")], label: "e", summary: "edit a waiting job's command (a failed or cancelled one: edit and retry)",
                   action: .editCommand),
        KeyBinding(keys: [.char("x")], label: "x", summary: "send a signal to the selected (or tagged) running jobs (a menu: TERM KILL STOP CONT …)",
                   action: .signal),
        KeyBinding(keys: [.char("+"), .function(7)], label: "+ F7",
                   summary: "raise the selected job's priority", action: .raisePriority, footer: ("+-", "Prio")),
        KeyBinding(keys: [.char("-"), .function(8)], label: "- F8", summary: "lower the selected job's priority",
                   action: .lowerPriority),
        KeyBinding(keys: [.char("=")], label: "=", summary: "set the selected (or tagged) jobs' priority to a number",
                   action: .setPriority),
        KeyBinding(keys: [.char("w")], label: "w", summary: "write the selected job's output to a file", action: .saveOutput),
        KeyBinding(keys: [.char("r")], label: "r", summary: "retry a failed, cancelled or skipped job", action: .retry,
                   footer: ("r", "Retry")),
        KeyBinding(keys: [.char("p")], label: "p", summary: "pause / resume starting jobs", action: .togglePause,
                   footer: ("p", "Pause")),
        // `g`/`G` are Home/End (as in less and vim), so the group keys are the capitals of what
        // they do: P pauses a group as p pauses everything, L sets its limit.
        KeyBinding(keys: [.char("P")], label: "P", summary: "pause / resume the selected job's group",
                   action: .toggleGroupPause),
        KeyBinding(keys: [.char("L")], label: "L", summary: "limit of the selected job's group (empty: none)",
                   action: .setGroupLimit),
        KeyBinding(keys: [.char("<")], label: "<", summary: "one local slot less", action: .fewerSlots),
        KeyBinding(keys: [.char(">")], label: ">", summary: "one local slot more", action: .moreSlots,
                   footer: ("<>", "Slots")),
        KeyBinding(keys: [.char("/")], label: "/", summary: "filter by text (Esc clears)", action: .filter,
                   footer: ("/", "Filter")),
        KeyBinding(keys: [.char("s")], label: "s", summary: "cycle the sort order", action: .cycleSort,
                   footer: ("s", "Sort")),
        KeyBinding(keys: [.char("?"), .function(1)], label: "? F1", summary: "this help", action: .help,
                   footer: ("?", "Help")),
        KeyBinding(keys: [.char("E")], label: "E", summary: "every event, full screen and scrollable", action: .eventsView),
        KeyBinding(keys: [.char("t")], label: "t", summary: "timeline: one lane per worker slot, jobs as bars over the last minutes",
                   action: .timeline),
        KeyBinding(keys: [.char("q"), .function(10)], label: "q F10",
                   summary: "quit (asks first while jobs are active)", action: .quit, footer: ("q", "Quit")),
        KeyBinding(keys: [.control("c")], label: "Ctrl-C", summary: "like q; a second Ctrl-C forces", action: .interrupt),
        KeyBinding(keys: [.control("l")], label: "Ctrl-L", summary: "draw the whole screen again", action: .repaint),
        KeyBinding(keys: [.char("X")], label: "X", summary: "attached: shut jobtop serve down (asks y/n)", action: .shutdownServe),
    ]

    private static let byKey: [Key: TableAction] = {
        var map: [Key: TableAction] = [:]
        for binding in table {
            for key in binding.keys {
                precondition(map[key] == nil, "key \(key) bound twice")
                map[key] = binding.action
            }
        }
        return map
    }()

    /// The action `key` triggers on the job table, if any.
    static func action(for key: Key) -> TableAction? { byKey[key] }

    /// Bindings that help shows on one line, with the summary for both.
    static let helpPairs: [(first: TableAction, second: TableAction, summary: String)] = [
        (.moveUp, .moveDown, "select the previous / next job"),
        (.pageUp, .pageDown, "one page up / down"),
        (.moveToTop, .moveToBottom, "first / last job"),
        (.raisePriority, .lowerPriority, "raise / lower the selected job's priority"),
        (.fewerSlots, .moreSlots, "one local slot less / more"),
        (.toggleTag, .untagAll, "tag the selected job (c + - r act on all tagged) / untag all"),
        (.showOutput, .saveOutput, "the job's details and output (Esc returns) / write its output to a file"),
        (.help, .eventsView, "this help / every event, full screen"),
        (.quit, .interrupt, "quit (asks while jobs are active) / the same; twice forces"),
        (.editCommand, .signal, "edit a waiting job's command (a failed one: and retry) / send a signal"),
        (.filter, .cycleSort, "filter by text (Esc clears) / cycle the sort order"),
    ]

    /// Help's lines: each binding once, pairs on one line, as (keys, summary).
    static var helpLines: [(label: String, summary: String)] {
        var lines: [(label: String, summary: String)] = []
        var shown: Set<TableAction> = []
        for binding in table where !shown.contains(binding.action) {
            if let pair = helpPairs.first(where: { $0.first == binding.action }),
               let second = table.first(where: { $0.action == pair.second }) {
                lines.append((binding.label + "  " + second.label, pair.summary))
                shown.insert(pair.second)
            } else {
                lines.append((binding.label, binding.summary))
            }
            shown.insert(binding.action)
        }
        return lines
    }

    /// The footer's entries, htop style: help first, quit last.
    static let footerOrder: [TableAction] = [
        .help, .enqueue, .cancel, .raisePriority, .retry, .togglePause, .moreSlots, .filter, .cycleSort, .showOutput, .quit,
    ]
    /// Which footer entries a narrow screen leaves out first.
    static let footerDropOrder: [TableAction] = [.showOutput, .moreSlots, .retry, .cycleSort, .filter, .raisePriority, .togglePause]

    /// The footer's entries for a screen `width` cells wide, in order, and whether they are
    /// drawn compact (htop's `F1Help`: no space between key and label, one between entries),
    /// which an 80-column screen needs to show every key.
    static func footer(width: Int) -> (entries: [(key: String, label: String)], isCompact: Bool) {
        let layout = footerLayout(width: width)
        return (layout.actions.compactMap { action in table.first { $0.action == action }?.footer }, layout.isCompact)
    }

    /// The footer entry drawn at `column` of a footer `width` cells wide (as
    /// ``footer(width:)`` lays it out), for a click on it.
    static func footerAction(at column: Int, width: Int) -> TableAction? {
        let layout = footerLayout(width: width)
        var start = 0
        for (index, action) in layout.actions.enumerated() {
            guard let entry = table.first(where: { $0.action == action })?.footer else { continue }
            let cells = TextWidth.width(entry.key) + TextWidth.width(entry.label) + (layout.isCompact ? (index == 0 ? 0 : 1) : 3)
            if column >= start && column < start + cells { return action }
            start += cells
        }
        return nil
    }

    private static func footerLayout(width: Int) -> (actions: [TableAction], isCompact: Bool) {
        var actions = footerOrder
        func cells(_ actions: [TableAction], compact: Bool) -> Int {
            // Compact entries are one space apart, the first at the edge.
            actions.compactMap { action in table.first { $0.action == action }?.footer }
                .reduce(compact ? -1 : 0) { $0 + TextWidth.width($1.key) + TextWidth.width($1.label) + (compact ? 1 : 3) }
        }
        let isCompact = cells(actions, compact: false) > width
        for dropped in footerDropOrder where cells(actions, compact: isCompact) > width {
            actions.removeAll { $0 == dropped }
        }
        return (actions, isCompact)
    }
}
