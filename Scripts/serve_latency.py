"""What Scripts/bench-serve.py and Scripts/bench-client-ab.py share: one `jobtop submit`'s latency
against a running serve, and percentiles."""
import os, subprocess, time


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def submit_latency(binary, env, work, database, tag):
    """Runs `binary submit -c 'date ...'` once and returns, in ms from just before it starts:
    (the submit process exiting (ids printed), the serve's store recording the `started` event
    (the attempt's `started_at`: the wall clock when the store journals it, a bound from above on
    the event), the job's `date` running (which adds the job's sh and date start-up))."""
    mark = os.path.join(work, f"mark-{tag}")
    wall = time.time_ns()
    start = time.perf_counter_ns()
    short = subprocess.run([binary, "submit", "-c", f"date +%s%N > {mark}.tmp && mv {mark}.tmp {mark}"], env=env, check=True,
                           stdout=subprocess.PIPE, text=True).stdout.strip()
    exited = (time.perf_counter_ns() - start) / 1e6
    while not os.path.exists(mark):
        time.sleep(0.0005)
    running = (int(open(mark).read()) - wall) / 1e6
    query = "SELECT started_at FROM attempt WHERE job LIKE ? AND number = 1"
    while (row := database.execute(query, (short + "%",)).fetchone()) is None:
        time.sleep(0.0005)
    return exited, (row[0] * 1e9 - wall) / 1e6, running
