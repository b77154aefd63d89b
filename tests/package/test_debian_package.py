#!/usr/bin/python3
"""The Debian package end to end: build it from a copy of the source tree
with `dpkg-buildpackage -b -us -uc`, check it with lintian (no errors),
install it with `dpkg -i`, delete the copy, run the installed PyPerf's
gProfiler start-up check from an empty directory, check that the manual page
documents every option of --help, and purge the package, always.

Usage: test_debian_package.py --source DIR [--keep]
Exit status: 0 passed, 1 failed, 77 skipped (not root, or packaging tools
missing); PYPERF_TEST_STRICT=1 turns a skip into a failure.
"""
import argparse
import glob
import os
import random
import re
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/
import script_support  # noqa: E402
from script_support import Failure, Skip, check, log  # noqa: E402

PACKAGE = "pyperf"
INSTALLED_BINARY = "/usr/bin/PyPerf"
INSTALLED_MANPAGE = "/usr/share/man/man8/PyPerf.8.gz"
BUILD_TIMEOUT = 1200  # seconds; a cold build on 2 cores takes a few minutes
# What the copy leaves out: build trees and what an in-tree package build leaves.
EXCLUDED = re.compile(r"^(build[^/]*|obj-[^/]*|\.git|\.cache|debian/(pyperf|tmp|\.debhelper)"
                      r"|debian/(files|debhelper-build-stamp|[^/]*\.substvars|[^/]*\.debhelper\.log))(/|$)")


def run(cmd, timeout, **kw):
    """Runs cmd; returns the CompletedProcess (stdout and stderr merged).
    The whole process group is killed on timeout."""
    log("$ " + " ".join(cmd))
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, start_new_session=True, **kw)
    try:
        out, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, _ = process.communicate()
        raise Failure("%s did not finish within %d s; output ends:\n%s"
                      % (cmd[0], timeout, out.decode("utf-8", "replace")[-4000:]))
    return subprocess.CompletedProcess(cmd, process.returncode, out.decode("utf-8", "replace"), None)


def tail(text, lines=60):
    return "\n".join(text.splitlines()[-lines:])


def source_files(source):
    """Relative paths of the tree to package: git's view (tracked and
    untracked, not ignored) when it is a git work tree, else every file."""
    try:
        out = subprocess.run(["git", "-C", source, "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, check=True).stdout
        files = [f for f in out.decode().split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for root, dirs, names in os.walk(source, followlinks=True):
            rel_root = os.path.relpath(root, source)
            dirs[:] = [d for d in dirs
                       if not EXCLUDED.match(os.path.normpath(os.path.join(rel_root, d)))]
            files += [os.path.normpath(os.path.join(rel_root, n)) for n in names]
    return sorted(f for f in set(files) if not EXCLUDED.match(f)
                  and os.path.lexists(os.path.join(source, f)))


def copy_tree(source, dest):
    for rel in source_files(source):
        src = os.path.join(source, rel)
        dst = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.islink(src):
            os.symlink(os.readlink(src), dst)
        elif os.path.isfile(src):
            shutil.copy2(src, dst)
    check(os.path.isfile(os.path.join(dest, "debian", "rules")), "the copy has no debian/rules")


def installed_version(package):
    out = subprocess.run(["dpkg-query", "-W", "-f=${Status} ${Version}", package],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode()
    return out.split()[-1] if out.startswith("install ok installed") else None


def require_tools():
    if os.geteuid() != 0:
        raise Skip("installing a package needs root")
    missing = [tool for tool in ("dpkg-buildpackage", "dh", "dpkg-deb", "lintian", "cmake")
               if shutil.which(tool) is None]
    if missing:
        raise Skip("missing packaging tools %s (apt-get install dpkg-dev debhelper lintian cmake)"
                   % missing)


def startup_check(binary, workdir):
    """gProfiler's start-up check against the installed binary, from an
    empty directory: exit 0 within 10 s and at least one <output>.* file."""
    output = os.path.join(workdir, "pyperf.%s.col" % "".join(
        random.choice(string.ascii_letters) for _ in range(16)))
    cmd = [binary, "--output", output, "-F", "1", "--duration", "1"]
    started = time.monotonic()
    result = run(cmd, timeout=10, cwd=workdir, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    elapsed = time.monotonic() - started
    files = glob.glob(output + ".*")
    log("start-up check: exit %d after %.2fs, files %s" % (result.returncode, elapsed,
                                                          [os.path.basename(f) for f in files]))
    check(result.returncode == 0, "installed PyPerf start-up check: exit %d, output:\n%s"
          % (result.returncode, tail(result.stdout)))
    check(files, "installed PyPerf left no %s.* file; output:\n%s" % (output, tail(result.stdout)))


def check_manual(binary):
    """Every option --help lists is in the manual page."""
    help_text = run([binary, "--help"], timeout=10).stdout
    options = sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", help_text)))
    check("--output" in options and "--insert-dso-name" in options,
          "--help does not list the options: %s" % help_text)
    check(os.path.exists(INSTALLED_MANPAGE), "no manual page at %s" % INSTALLED_MANPAGE)
    page = run(["zcat", INSTALLED_MANPAGE], timeout=10).stdout.replace("\\-", "-")
    missing = [o for o in options if not re.search(re.escape(o) + r"(?![\w-])", page)]
    check(not missing, "the manual page does not document %s" % missing)
    log("manual page documents all %d options of --help" % len(options))


def test(source, keep):
    require_tools()
    check(installed_version(PACKAGE) is None,
          "package %s is already installed (%s); this test installs and purges it, so remove it "
          "first: dpkg --purge %s" % (PACKAGE, installed_version(PACKAGE), PACKAGE))
    top = tempfile.mkdtemp(prefix="pyperf-package-")
    installed = False
    try:
        tree = os.path.join(top, "bcc-pyperf")
        copy_tree(source, tree)
        log("copied %s to %s" % (source, tree))

        env = dict(os.environ)
        env["DEB_BUILD_OPTIONS"] = "nocheck parallel=%d" % (os.cpu_count() or 1)
        started = time.monotonic()
        build = run(["dpkg-buildpackage", "-b", "-us", "-uc"], BUILD_TIMEOUT, cwd=tree, env=env)
        log("dpkg-buildpackage: exit %d after %.0fs" % (build.returncode, time.monotonic() - started))
        check(build.returncode == 0, "dpkg-buildpackage failed:\n%s" % tail(build.stdout, 80))
        debs = glob.glob(os.path.join(top, "%s_*.deb" % PACKAGE))
        check(len(debs) == 1, "expected one %s_*.deb in %s, found %s" % (PACKAGE, top, os.listdir(top)))
        deb = debs[0]
        changes = glob.glob(os.path.join(top, "*.changes"))

        contents = run(["dpkg-deb", "--contents", deb], timeout=60).stdout
        log(contents.rstrip())
        for path in (INSTALLED_BINARY, INSTALLED_MANPAGE):
            check(re.search(r" \.%s$" % re.escape(path), contents, re.M), "%s not in %s" % (path, deb))
        fields = run(["dpkg-deb", "--field", deb, "Depends"], timeout=60).stdout.strip()
        log("Depends: " + fields)
        check("libbpfcc" in fields, "Depends lacks libbpfcc (shlibs): %r" % fields)

        lint = run(["lintian", "--fail-on", "error", "--display-info"] + (changes or [deb]),
                   timeout=600)
        log("lintian: exit %d\n%s" % (lint.returncode, lint.stdout.rstrip()))
        errors = [l for l in lint.stdout.splitlines() if l.startswith("E:")]
        check(lint.returncode == 0 and not errors, "lintian reports errors:\n%s"
              % "\n".join(errors or lint.stdout.splitlines()[-20:]))

        if not keep:
            shutil.rmtree(tree)  # nothing of the source tree is left to lean on
        installed = True  # from here on, purge whatever dpkg -i managed to do
        inst = run(["dpkg", "-i", deb], timeout=300)
        check(inst.returncode == 0, "dpkg -i failed:\n%s" % tail(inst.stdout))
        check(installed_version(PACKAGE), "dpkg -i did not leave %s installed" % PACKAGE)

        workdir = os.path.join(top, "empty")
        os.mkdir(workdir)
        startup_check(INSTALLED_BINARY, workdir)
        check_manual(INSTALLED_BINARY)
    finally:
        if installed:
            purge = run(["dpkg", "--purge", PACKAGE], timeout=300)
            log("dpkg --purge: exit %d" % purge.returncode)
        if not keep:
            shutil.rmtree(top, ignore_errors=True)
        else:
            log("kept %s" % top)
    check(installed_version(PACKAGE) is None and not os.path.exists(INSTALLED_BINARY),
          "%s is still installed after dpkg --purge" % PACKAGE)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", required=True, help="the source tree (with debian/)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    return script_support.run(lambda: test(os.path.abspath(args.source), args.keep),
                              "the Debian package test")


if __name__ == "__main__":
    sys.exit(main())
