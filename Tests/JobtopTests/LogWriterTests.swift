import Foundation
import Testing
@testable import jobtop
import Scheduler

@Suite("Log writer", .timeLimit(.minutes(1)))
struct LogWriterTests {
    @Test("A reader that does not read: the queue fills past its bound and waitForRoom holds until the bytes are read")
    func theQueueIsBounded() async throws {
        var fds: [Int32] = [-1, -1]
        #expect(pipe(&fds) == 0)
        let writer = LogWriter()
        let size = LogWriter.capacity + (1 << 20)
        // Nobody reads the pipe: its 64 KiB fill and the writer's thread blocks in write(2), so
        // what was handed over stays queued.
        writer.write([UInt8](repeating: 0x61, count: size), to: fds[1])
        #expect(!writer.hasRoom)

        // When the bytes are read, the queue drains and a waiting producer goes on.
        // (Read on a thread of its own: a blocking read must not hold a cooperative thread.)
        let reader = fds[0]
        let total = Locked(0)
        let done = DispatchSemaphore(value: 0)
        Thread {
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let count = buffer.withUnsafeMutableBytes { Glibc.read(reader, $0.baseAddress, $0.count) }
                if count <= 0 { break }
                total.withLock { $0 += count }
            }
            done.signal()
        }.start()
        await writer.waitForRoom()
        #expect(writer.hasRoom)
        writer.close(fds[1])
        writer.finish()
        done.wait()
        #expect(total.withLock { $0 } == size, "every byte was written")
        close(fds[0])
    }
}
