"""A slow filesystem for tests: a FUSE passthrough over ROOT mounted at MOUNT (fusepy over libfuse2) that
delays every getattr, open and read by the number of seconds in the file DELAY_FILE (absent or empty: no
delay), re-read while an operation waits, so that lowering the delay also releases operations already
waiting. With --refuse-direct an open with O_DIRECT fails with EINVAL, as on filesystems without direct I/O
(this kernel's FUSE itself passes O_DIRECT to the filesystem). Runs in the foreground until unmounted:

    python slow_fs.py [--refuse-direct] ROOT MOUNT DELAY_FILE

The kernel's attribute and entry caches are off (timeouts 0), so every path lookup reaches this process and
is delayed, as on a slow network filesystem."""
import errno
import os
import sys
import time

from fuse import FUSE, FuseOSError, Operations  # fusepy


STAT_FIELDS = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks", "st_atime", "st_mtime", "st_ctime")


class SlowPassthrough(Operations):
    def __init__(self, root, delay_file, refuse_direct):
        self.root = os.path.realpath(root)
        self.delay_file = delay_file
        self.refuse_direct = refuse_direct

    def _full(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def _delay(self):
        try:
            with open(self.delay_file) as f:
                text = f.read().strip()
            return float(text) if text else 0.0
        except (OSError, ValueError):
            return 0.0

    def _wait(self):
        start = time.monotonic()
        while True:
            left = self._delay() - (time.monotonic() - start)
            if left <= 0:
                return
            time.sleep(min(left, 0.05))

    @staticmethod
    def _call(fn, *args):
        try:
            return fn(*args)
        except OSError as e:
            raise FuseOSError(e.errno or errno.EIO) from None

    # Delayed.
    def getattr(self, path, fh=None):
        self._wait()
        st = self._call(os.fstat, fh) if fh is not None else self._call(os.lstat, self._full(path))
        return {k: getattr(st, k) for k in STAT_FIELDS}

    def open(self, path, flags):
        self._wait()
        if self.refuse_direct and flags & os.O_DIRECT:
            raise FuseOSError(errno.EINVAL)
        # O_DIRECT reaches a FUSE filesystem as a flag of the open; the backing file is read with plain
        # buffered preads (Python's buffers are not page-aligned), which is what a passthrough may do.
        return self._call(os.open, self._full(path), flags & ~os.O_DIRECT)

    def read(self, path, size, offset, fh):
        self._wait()
        return self._call(os.pread, fh, size, offset)

    # Not delayed.
    def access(self, path, mode):
        if not os.access(self._full(path), mode):
            raise FuseOSError(errno.EACCES)

    def readdir(self, path, fh):
        return [".", ".."] + self._call(os.listdir, self._full(path))

    def statfs(self, path):
        st = self._call(os.statvfs, self._full(path))
        return {k: getattr(st, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                                             "f_files", "f_flag", "f_frsize", "f_namemax")}

    def create(self, path, mode, fi=None):
        return self._call(os.open, self._full(path), os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)

    def write(self, path, data, offset, fh):
        return self._call(os.pwrite, fh, data, offset)

    def truncate(self, path, length, fh=None):
        if fh is not None:
            self._call(os.ftruncate, fh, length)
        else:
            self._call(os.truncate, self._full(path), length)

    def flush(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        self._call(os.fdatasync if datasync else os.fsync, fh)

    def release(self, path, fh):
        self._call(os.close, fh)

    def utimens(self, path, times=None):
        self._call(os.utime, self._full(path), times)

    def chmod(self, path, mode):
        self._call(os.chmod, self._full(path), mode)

    def mkdir(self, path, mode):
        self._call(os.mkdir, self._full(path), mode)

    def rmdir(self, path):
        self._call(os.rmdir, self._full(path))

    def unlink(self, path):
        self._call(os.unlink, self._full(path))

    def rename(self, old, new):
        self._call(os.rename, self._full(old), self._full(new))


def main():
    args = sys.argv[1:]
    refuse_direct = "--refuse-direct" in args
    args = [a for a in args if a != "--refuse-direct"]
    if len(args) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    root, mount, delay_file = args
    FUSE(SlowPassthrough(root, delay_file, refuse_direct), mount, foreground=True, nothreads=False, attr_timeout=0,
         entry_timeout=0, negative_timeout=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
