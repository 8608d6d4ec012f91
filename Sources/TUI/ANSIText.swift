/// A job's output line as it is meant to look: its SGR color codes (`ESC [ 31 m`) become roles,
/// every other control sequence and character is dropped or made visible by
/// ``TextWidth/sanitize(_:)``, and a bell (BEL) is dropped rather than shown as `�`.
enum ANSIText {
    /// The line as segments, starting in `base` (stdout's or stderr's role).
    static func segments(_ text: String, base: Role) -> [Segment] {
        // Most lines have no escape and no bell: one segment, no walk.
        guard text.unicodeScalars.contains(where: { $0.value == 0x1B || $0.value == 0x07 }) else {
            return [Segment(TextWidth.sanitize(text), base)]
        }
        var segments: [Segment] = []
        var role = base
        var current = String.UnicodeScalarView()
        var scalars = Array(text.unicodeScalars)[...]
        func flush() {
            guard !current.isEmpty else { return }
            segments.append(Segment(TextWidth.sanitize(String(current)), role))
            current = String.UnicodeScalarView()
        }
        while let scalar = scalars.popFirst() {
            if scalar.value == 0x07 { continue }
            if scalar.value == 0x1B, scalars.first == "]" {
                // An OSC (a window title, a hyperlink): kept whole, with the BEL or ESC \ that
                // ends it, for sanitize to drop. Its BEL dropped here, sanitize took the rest of
                // the line for the OSC.
                current.append(scalar)
                while let next = scalars.popFirst() {
                    current.append(next)
                    if next.value == 0x07 { break }
                    if next.value == 0x1B {
                        if let terminator = scalars.popFirst() { current.append(terminator) }
                        break
                    }
                }
                continue
            }
            guard scalar.value == 0x1B, scalars.first == "[" else {
                current.append(scalar)
                continue
            }
            // A CSI sequence: parameters, then one final byte.
            var sequence = String.UnicodeScalarView([scalar])
            var final: Unicode.Scalar?
            while let next = scalars.popFirst() {
                sequence.append(next)
                if next != "[", (0x40...0x7E).contains(next.value) { final = next; break }
            }
            guard final == "m" else {
                // Not a color: sanitize drops it with the text around it.
                current.append(contentsOf: sequence)
                continue
            }
            let parameters = String(sequence).dropFirst(2).dropLast()
            let codes = parameters.split(separator: ";", omittingEmptySubsequences: false).map { Int($0) ?? 0 }
            let next = Self.role(after: codes, from: role, base: base)
            if next != role {
                flush()
                role = next
            }
        }
        flush()
        return segments.isEmpty ? [Segment("", base)] : segments
    }

    /// The role SGR `codes` leave the text in.
    static func role(after codes: [Int], from role: Role, base: Role) -> Role {
        var role = role
        var index = 0
        while index < codes.count {
            let code = codes[index]
            switch code {
            case 0, 39: role = base
            case 30...37, 90...97: role = color((code % 10))
            case 38:
                // 38;5;N (256 colors: the first 16 are the basic ones) or 38;2;R;G;B: the basic
                // color nearest (they were left plain).
                if index + 2 < codes.count, codes[index + 1] == 5 {
                    role = color(basicColor(of256: codes[index + 2]))
                    index += 2
                } else if index + 4 < codes.count, codes[index + 1] == 2 {
                    role = color(basicColor(red: codes[index + 2], green: codes[index + 3], blue: codes[index + 4]))
                    index += 4
                }
            case 48:
                if index + 2 < codes.count, codes[index + 1] == 5 { index += 2 }
                else if index + 4 < codes.count, codes[index + 1] == 2 { index += 4 }
            default: break
            }
            index += 1
        }
        return role
    }

    /// The basic color (0 black ... 7 white) nearest 256-color `n`: the first 16 are the basic
    /// ones, then a 6×6×6 cube, then 24 grays.
    static func basicColor(of256 n: Int) -> Int {
        switch n {
        case ..<16: return n % 8
        case 16..<232:
            // Its levels are 0, 95, 135, 175, 215, 255: on from 135 (half), as a true color.
            let cube = n - 16
            return (cube / 36 >= 2 ? 1 : 0) + ((cube / 6) % 6 >= 2 ? 2 : 0) + (cube % 6 >= 2 ? 4 : 0)
        default: return n < 244 ? 0 : 7
        }
    }

    /// The basic color nearest a true color: each channel on or off at half.
    static func basicColor(red: Int, green: Int, blue: Int) -> Int {
        (red >= 128 ? 1 : 0) + (green >= 128 ? 2 : 0) + (blue >= 128 ? 4 : 0)
    }

    /// The dashboard's role closest to ANSI color `n` (0 black ... 7 white).
    private static func color(_ n: Int) -> Role {
        switch n {
        case 1: .failed
        case 2: .succeeded
        case 3: .waiting
        case 4: .blocked
        case 5: .cancelled
        case 6: .queued
        case 0: .dim
        default: .normal
        }
    }

    /// `segments` without their first `cells` cells (the output view scrolled sideways).
    static func dropCells(_ segments: [Segment], _ cells: Int) -> [Segment] {
        guard cells > 0 else { return segments }
        var left = cells
        var result: [Segment] = []
        for segment in segments {
            if left <= 0 {
                result.append(segment)
                continue
            }
            var kept = String.UnicodeScalarView()
            for scalar in segment.text.unicodeScalars {
                if left > 0 {
                    let width = TextWidth.width(of: scalar)
                    // A wide character cut in half leaves a space.
                    if width > left { kept.append(" ") }
                    left -= width
                    continue
                }
                kept.append(scalar)
            }
            if !kept.isEmpty { result.append(Segment(String(kept), segment.role)) }
        }
        return result
    }
}
