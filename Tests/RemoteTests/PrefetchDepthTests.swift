import Testing
@testable import SchedulerRemote

/// The automatic prefetch depth: enough held jobs to cover a round trip, doubled; 1 for long
/// jobs or a short link; bounded; grows at once, shrinks only to half or less.
@Suite struct PrefetchDepthTests {
    @Test func needsBothARoundTripAndARunTimeBeforeItMoves() {
        var depth = PrefetchDepth(slots: 2)
        #expect(depth.depth == 1)
        #expect(depth.heard(roundTrip: .milliseconds(20)) == nil)
        #expect(depth.depth == 1)
    }

    @Test func shortJobsOverALongLinkHoldEnoughToCoverTheRoundTripUpToTheLimit() {
        // 2 slots, 20 ms round trips, 5 ms jobs: 2 × 2 × 20 / 5 = 16, the limit for 2 slots.
        var depth = PrefetchDepth(slots: 2)
        for _ in 0..<PrefetchDepth.firstRunTimes { _ = depth.heard(roundTrip: .milliseconds(20)) }
        // Not before it heard a few run times.
        for _ in 1..<PrefetchDepth.firstRunTimes { #expect(depth.ran(for: .milliseconds(5)) == nil) }
        #expect(depth.ran(for: .milliseconds(5)) == 16)
        #expect(depth.limit == 16)
        // 160 ms jobs: 2 × 2 × 20 / 160 = 0.5, under half of what it holds: it shrinks, to 1.
        for _ in 0..<40 { _ = depth.ran(for: .milliseconds(160)) }
        #expect(depth.depth == 1)
        // Even shorter jobs: never above the limit.
        for _ in 0..<40 { _ = depth.ran(for: .microseconds(10)) }
        #expect(depth.depth == 16)
    }

    @Test func longJobsOrAShortLinkKeepOne() {
        var lan = PrefetchDepth(slots: 4)
        for _ in 0..<PrefetchDepth.firstRunTimes { _ = lan.heard(roundTrip: .microseconds(400)) }
        for _ in 0..<PrefetchDepth.firstRunTimes { #expect(lan.ran(for: .milliseconds(50)) == nil) }
        #expect(lan.depth == 1)
        var slow = PrefetchDepth(slots: 4)
        for _ in 0..<PrefetchDepth.firstRunTimes { _ = slow.heard(roundTrip: .milliseconds(100)) }
        for _ in 0..<PrefetchDepth.firstRunTimes { #expect(slow.ran(for: .seconds(600)) == nil) }
        #expect(slow.depth == 1)
    }

    @Test func noiseDoesNotResizeItAtEveryJob() {
        // 2 × 1 × 10 / 2 = 10 with 1 slot: the limit, 8.
        var depth = PrefetchDepth(slots: 1)
        for _ in 0..<PrefetchDepth.firstRunTimes { _ = depth.heard(roundTrip: .milliseconds(10)) }
        for _ in 1..<PrefetchDepth.firstRunTimes { _ = depth.ran(for: .milliseconds(2)) }
        #expect(depth.ran(for: .milliseconds(2)) == 8)  // the limit for 1 slot
        var changes = 0
        for index in 0..<200 {
            // Run times between 2 and 4 ms: wanted 5 to 10, never under half of 8.
            if depth.ran(for: .microseconds(2_000 + (index % 3) * 1_000)) != nil { changes += 1 }
        }
        #expect(changes == 0)
        #expect(depth.depth == 8)
    }

    @Test func theLimitIsEightPerSlotAndSixtyFourInAll() {
        #expect(PrefetchDepth.limit(slots: 1) == 8)
        #expect(PrefetchDepth.limit(slots: 4) == 32)
        #expect(PrefetchDepth.limit(slots: 100) == 64)
    }
}

extension PrefetchDepthTests {
    @Test func theRoundTripIsTheLinksNotTheQueueBehindTheAcknowledgements() {
        // On loopback the link takes 0.3 ms, but acknowledgements queued behind a burst of
        // assignments take up to 10 ms: the least of the recent ones is what counts, so 2 ms
        // jobs stay at depth 1 (2 × 2 × 0.3 / 2 = 0.6), not 2 × 2 × 10 / 2 = 20.
        var depth = PrefetchDepth(slots: 2)
        for index in 0..<40 { _ = depth.heard(roundTrip: index % 8 == 0 ? .microseconds(300) : .milliseconds(10)) }
        for _ in 0..<PrefetchDepth.firstRunTimes { #expect(depth.ran(for: .milliseconds(2)) == nil) }
        #expect(depth.depth == 1)
        // A link that got longer for good: once its short round trips have left the window.
        for _ in 0..<PrefetchDepth.roundTripWindow { _ = depth.heard(roundTrip: .milliseconds(20)) }
        #expect(depth.depth == 16)
    }
}

extension PrefetchDepthTests {
    @Test func aWantNearOneAndAHalfDoesNotFlipBetweenOneAndTwo() {
        // 2 slots, 1 ms round trips, run times around 2.7 ms: wanted 1.3–1.7.
        var depth = PrefetchDepth(slots: 2)
        for _ in 0..<PrefetchDepth.firstRunTimes { _ = depth.heard(roundTrip: .milliseconds(1)) }
        var changes = 0
        for index in 0..<200 {
            if depth.ran(for: .microseconds(index % 2 == 0 ? 2_350 : 3_080)) != nil { changes += 1 }
        }
        #expect(changes <= 1)
        #expect(depth.depth <= 2)
    }
}
