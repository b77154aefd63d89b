# Workload for test_python_process: prints "READY <major.minor.micro> <hexversion>"
# so the test knows what the interpreter itself says, then idles until killed.
# Runs on every interpreter from 2.7 to 3.13.
import sys
import time

sys.stdout.write("READY %d.%d.%d %d\n" % (sys.version_info[0], sys.version_info[1],
                                          sys.version_info[2], sys.hexversion))
sys.stdout.flush()
while True:
    time.sleep(0.05)
