#!/usr/bin/env python3
"""A/B of two jobtop builds as clients of one serve: submit -> started (the store's record), the job's date,
the submit process's exit, status and --version, alternating, N rounds (default 150).

Usage: Scripts/bench-client-ab.py BEFORE AFTER [N]   (the serve is AFTER)
"""
import subprocess,time,os,statistics,sqlite3,tempfile,sys
work=tempfile.mkdtemp(prefix="jt-ab-")
env=dict(os.environ, XDG_RUNTIME_DIR=os.path.join(work,"run"), XDG_STATE_HOME=os.path.join(work,"state"))
before, after = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
serve=subprocess.Popen([after,"serve","-j","2"],env=env,stderr=subprocess.PIPE,text=True); serve.stderr.readline()
db=sqlite3.connect(f"file:{work}/state/jobtop/jobtop.db?mode=ro", uri=True)
bins={"before":before,"after":after}
res={k:{"exit":[],"started":[],"running":[],"status":[],"version":[]} for k in bins}
load0=open('/proc/loadavg').read().split()[0]
def pct(v,p): v=sorted(v); return v[min(len(v)-1,int(round(p/100*(len(v)-1))))]
for i in range(int(sys.argv[3]) if len(sys.argv)>3 else 150):
    for k,b in bins.items():
        mark=os.path.join(work,f"{k}{i}")
        w0=time.time_ns(); t0=time.perf_counter_ns()
        out=subprocess.run([b,"submit","-c",f"date +%s%N > {mark}.tmp && mv {mark}.tmp {mark}"],env=env,stdout=subprocess.PIPE,text=True).stdout.strip()
        res[k]["exit"].append((time.perf_counter_ns()-t0)/1e6)
        while not os.path.exists(mark): time.sleep(0.0005)
        res[k]["running"].append((int(open(mark).read())-w0)/1e6)
        while (row:=db.execute("SELECT started_at FROM attempt WHERE job LIKE ?", (out+"%",)).fetchone()) is None: time.sleep(0.0005)
        res[k]["started"].append((row[0]*1e9-w0)/1e6)
        t0=time.perf_counter_ns(); subprocess.run([b,"status"],env=env,stdout=subprocess.DEVNULL); res[k]["status"].append((time.perf_counter_ns()-t0)/1e6)
        t0=time.perf_counter_ns(); subprocess.run([b,"--version"],env=env,stdout=subprocess.DEVNULL); res[k]["version"].append((time.perf_counter_ns()-t0)/1e6)
load1=open('/proc/loadavg').read().split()[0]
for k in bins:
    print(k, "  ".join(f"{n} p50 {statistics.median(v):.2f} p99 {pct(v,99):.2f}" for n,v in res[k].items()))
print(f"load {load0} -> {load1}")
serve.terminate(); serve.wait()
