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
        _ = depth.heard(roundTrip: .milliseconds(20))
        #expect(depth.ran(for: .milliseconds(5)) == 16)
        #expect(depth.limit == 16)
        // 80 ms jobs: 2 × 2 × 20 / 80 = 1, at most half of what it holds: it shrinks.
        for _ in 0..<40 { _ = depth.ran(for: .milliseconds(80)) }
        #expect(depth.depth == 1)
        // Even shorter jobs: never above the limit.
        for _ in 0..<40 { _ = depth.ran(for: .microseconds(10)) }
        #expect(depth.depth == 16)
    }

    @Test func longJobsOrAShortLinkKeepOne() {
        var lan = PrefetchDepth(slots: 4)
        _ = lan.heard(roundTrip: .microseconds(400))
        #expect(lan.ran(for: .milliseconds(50)) == nil)
        #expect(lan.depth == 1)
        var slow = PrefetchDepth(slots: 4)
        _ = slow.heard(roundTrip: .milliseconds(100))
        #expect(slow.ran(for: .seconds(600)) == nil)
        #expect(slow.depth == 1)
    }

    @Test func noiseDoesNotResizeItAtEveryJob() {
        // Settled at 2 × 1 × 10 / 2 = 10 with 1 slot.
        var depth = PrefetchDepth(slots: 1)
        _ = depth.heard(roundTrip: .milliseconds(10))
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
