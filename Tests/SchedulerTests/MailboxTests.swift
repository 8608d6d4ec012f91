import Foundation
import Testing

@testable import Scheduler

/// The one mailbox type: what its users rely on (the remote layer's writer loops, the list
/// reader's back-pressure).
@Suite(.timeLimit(.minutes(1)))
struct MailboxTests {
    @Test("What is sent comes out in order, everything there is in one take")
    func batchesInOrder() async {
        let mailbox = Mailbox<Int>()
        mailbox.send(1)
        mailbox.send(contentsOf: [2, 3])
        #expect(await mailbox.take() == [1, 2, 3])
        mailbox.send(4)
        #expect(await mailbox.take() == [4])
    }

    @Test("A take that waits gets what is sent after it began")
    func waitingTakeIsWoken() async {
        let mailbox = Mailbox<String>()
        let taking = Task { await mailbox.take() }
        mailbox.send("hello")
        #expect(await taking.value == ["hello"])
    }

    @Test("finish: what is in it still comes out, then nil; what is sent afterwards is refused")
    func finishDrainsThenEnds() async {
        let mailbox = Mailbox<Int>()
        #expect(mailbox.send(1))
        mailbox.finish()
        #expect(!mailbox.send(2))
        #expect(await mailbox.take() == [1])
        #expect(await mailbox.take() == nil)
    }

    @Test("finish wakes a waiting take with nil")
    func finishWakesTheConsumer() async {
        let mailbox = Mailbox<Int>()
        let taking = Task { await mailbox.take() }
        mailbox.finish()
        #expect(await taking.value == nil)
    }

    @Test("Cancelling a waiting take ends it with nil; the mailbox goes on working")
    func cancelledTakeEnds() async {
        let mailbox = Mailbox<Int>()
        let taking = Task { await mailbox.take() }
        taking.cancel()
        #expect(await taking.value == nil)
        mailbox.send(7)
        #expect(await mailbox.take() == [7])
    }

    @Test("sendBlocking holds its thread while the mailbox is full, until the consumer takes")
    func sendBlockingWaitsForRoom() async {
        // Given a full mailbox (capacity 2).
        let mailbox = Mailbox<Int>(capacity: 2)
        mailbox.send(contentsOf: [1, 2])
        // When a thread sends one more.
        let sent = Mailbox<Bool>()
        Thread.detachNewThread { sent.send(mailbox.sendBlocking(contentsOf: [3])) }
        // Then it was not put in before the consumer took the first two...
        #expect(await mailbox.take() == [1, 2])
        // ...and it is put in once there is room.
        #expect(await sent.take() == [true])
        #expect(await mailbox.take() == [3])
    }

    @Test("finish lets a blocked sender go, refused")
    func finishReleasesBlockedSenders() async {
        let mailbox = Mailbox<Int>(capacity: 1)
        mailbox.send(1)
        let sent = Mailbox<Bool>()
        Thread.detachNewThread { sent.send(mailbox.sendBlocking(contentsOf: [2])) }
        mailbox.finish()
        #expect(await sent.take() == [false])
        #expect(await mailbox.take() == [1])
        #expect(await mailbox.take() == nil)
    }
}

extension MailboxTests {
    @Test("waitForRoom holds a task while the mailbox is full, until the consumer takes")
    func waitForRoomWaitsForTheConsumer() async {
        // Given a full mailbox (capacity 2) and a producer task that waits for room before it sends.
        let mailbox = Mailbox<Int>(capacity: 2)
        mailbox.send(contentsOf: [1, 2])
        let producing = Task {
            await mailbox.waitForRoom()
            mailbox.send(3)
        }
        // Then nothing more was put in before the consumer took the first two...
        #expect(await mailbox.take() == [1, 2])
        // ...and the producer goes on once there is room.
        await producing.value
        #expect(await mailbox.take() == [3])
    }

    @Test("waitForRoom returns at once with room, and ends when the mailbox is finished or the task cancelled")
    func waitForRoomEnds() async {
        let roomy = Mailbox<Int>(capacity: 2)
        roomy.send(1)
        await roomy.waitForRoom()

        let finished = Mailbox<Int>(capacity: 1)
        finished.send(1)
        let waiting = Task { await finished.waitForRoom() }
        finished.finish()
        await waiting.value

        let full = Mailbox<Int>(capacity: 1)
        full.send(1)
        let cancelled = Task { await full.waitForRoom() }
        cancelled.cancel()
        await cancelled.value
        #expect(await full.take() == [1])
    }
}
