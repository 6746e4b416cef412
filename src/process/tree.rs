//! The command's process tree: finding every descendant of this process, signalling it,
//! and waiting until none is left (SPEC 7.1 item 8).
//!
//! Everything here runs in the supervisor, a child forked (without exec) from a process
//! that may have threads: only system calls, fixed buffers on the stack, no allocation, no
//! lock, no panic (see [`super::supervise`]). That is also why `/proc` is read with
//! `open`/`getdents64`/`read` instead of `std::fs`.

use std::time::{Duration, Instant};

/// How many descendants one walk keeps. A bigger tree is cleared over several rounds: a
/// process left out of one walk is found by a later one (its parent was killed, so it was
/// re-parented to this subreaper and stands higher in the tree).
const MAX_FOUND: usize = 1024;

/// Descendants as `(pid, parent)`, parents before children, without allocating.
pub(super) struct Found {
    items: [(i32, i32); MAX_FOUND],
    len: usize,
}

impl Found {
    fn new() -> Found {
        Found {
            items: [(0, 0); MAX_FOUND],
            len: 0,
        }
    }

    fn as_slice(&self) -> &[(i32, i32)] {
        self.items.get(..self.len).unwrap_or(&[])
    }

    fn contains(&self, pid: i32) -> bool {
        self.as_slice().iter().any(|&(p, _)| p == pid)
    }

    /// False when full.
    fn push(&mut self, pid: i32, parent: i32) -> bool {
        match self.items.get_mut(self.len) {
            Some(slot) => {
                *slot = (pid, parent);
                self.len += 1;
                true
            }
            None => false,
        }
    }
}

/// A NUL-terminated path built on the stack: `/proc/…` with numbers in it.
struct Path {
    buf: [u8; 64],
    len: usize,
}

impl Path {
    fn new() -> Path {
        Path {
            buf: [0; 64],
            len: 0,
        }
    }

    fn s(mut self, text: &[u8]) -> Path {
        for &b in text {
            let room = self.len + 1 < self.buf.len();
            if let Some(slot) = self.buf.get_mut(self.len)
                && room
            {
                *slot = b;
                self.len += 1;
            }
        }
        self
    }

    fn n(self, mut v: i32) -> Path {
        let mut digits = [0u8; 12];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10).unsigned_abs() as u8;
            v /= 10;
            if v == 0 || i == 0 {
                break;
            }
        }
        self.s(&digits[i..])
    }

    fn ptr(&self) -> *const libc::c_char {
        self.buf.as_ptr().cast()
    }
}

fn open(path: &Path, flags: libc::c_int) -> Option<libc::c_int> {
    // SAFETY: a NUL-terminated path on our stack (`Path` always leaves a trailing 0).
    let fd = unsafe { libc::open(path.ptr(), flags | libc::O_RDONLY | libc::O_CLOEXEC) };
    (fd >= 0).then_some(fd)
}

fn close(fd: libc::c_int) {
    // SAFETY: an fd this module opened.
    unsafe { libc::close(fd) };
}

/// Reads a file into `buf`; the bytes read (a `/proc` file is read whole up to `buf`).
fn read_into(path: &Path, buf: &mut [u8]) -> Option<usize> {
    let fd = open(path, 0)?;
    let mut len = 0;
    while len < buf.len() {
        let rest = buf.get_mut(len..).unwrap_or(&mut []);
        // SAFETY: reading into the unused tail of a buffer we own.
        let n = unsafe { libc::read(fd, rest.as_mut_ptr().cast(), rest.len()) };
        if n <= 0 {
            break;
        }
        len += n as usize;
    }
    close(fd);
    Some(len)
}

/// Calls `f` with each number in the file at `path` (a space-separated list of pids), read
/// in chunks so that a long list needs no big buffer.
fn each_number(path: &Path, mut f: impl FnMut(i32)) {
    let Some(fd) = open(path, 0) else { return };
    let mut buf = [0u8; 512];
    let mut cur: Option<i32> = None;
    loop {
        // SAFETY: reading into a buffer we own.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        for &b in buf.get(..n as usize).unwrap_or(&[]) {
            if b.is_ascii_digit() {
                let d = i32::from(b - b'0');
                cur = Some(cur.unwrap_or(0).saturating_mul(10).saturating_add(d));
            } else if let Some(v) = cur.take() {
                f(v);
            }
        }
    }
    if let Some(v) = cur {
        f(v);
    }
    close(fd);
}

/// Calls `f` with each numeric entry of the directory at `path` (pids, thread ids).
fn each_numeric_entry(path: &Path, mut f: impl FnMut(i32)) {
    let Some(fd) = open(path, libc::O_DIRECTORY) else {
        return;
    };
    let mut buf = [0u8; 2048];
    loop {
        // SAFETY: getdents64 fills a buffer we own with linux_dirent64 records.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                fd,
                buf.as_mut_ptr(),
                buf.len() as libc::c_uint,
            )
        };
        if n <= 0 {
            break;
        }
        let data = buf.get(..n as usize).unwrap_or(&[]);
        let mut at = 0;
        // linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type, NUL-terminated name.
        while let Some(rec) = data.get(at..at + 19) {
            let reclen = usize::from(u16::from_ne_bytes([rec[16], rec[17]]));
            if reclen == 0 {
                break;
            }
            let name = data.get(at + 19..at + reclen).unwrap_or(&[]);
            let mut v: Option<i32> = None;
            for &b in name {
                if b == 0 {
                    break;
                }
                if !b.is_ascii_digit() {
                    v = None;
                    break;
                }
                let d = i32::from(b - b'0');
                v = Some(v.unwrap_or(0).saturating_mul(10).saturating_add(d));
            }
            if let Some(v) = v {
                f(v);
            }
            at += reclen;
        }
    }
    close(fd);
}

/// The parent of a live (not zombie) process, from `/proc/PID/stat`.
pub(super) fn parent_pid(pid: i32) -> Option<i32> {
    let mut buf = [0u8; 1024];
    let n = read_into(&Path::new().s(b"/proc/").n(pid).s(b"/stat"), &mut buf)?;
    let stat = buf.get(..n)?;
    // Fields after the command name (which may hold spaces and parentheses).
    let close_paren = stat.iter().rposition(|&b| b == b')')?;
    let mut fields = stat
        .get(close_paren + 1..)?
        .split(|&b| b == b' ')
        .filter(|f| !f.is_empty());
    let state = fields.next()?;
    let mut ppid: i32 = 0;
    for &b in fields.next()? {
        if !b.is_ascii_digit() {
            return None;
        }
        ppid = ppid.saturating_mul(10).saturating_add(i32::from(b - b'0'));
    }
    (state != b"Z").then_some(ppid)
}

/// Every live descendant of this process, parents before children (at most
/// [`MAX_FOUND`]).
///
/// The kernel's per-thread children lists (`/proc/PID/task/TID/children`) are walked down
/// from this process, so the cost follows the job's own process tree, not the host's
/// process count. A kernel built without those lists (no CONFIG_PROC_CHILDREN) leaves the
/// scan of every process's parent link as the only way to find a descendant by pid.
fn descendants(found: &mut Found) {
    // SAFETY: getpid and access take no pointer we do not own.
    let me = unsafe { libc::getpid() };
    let lists = Path::new().s(b"/proc/thread-self/children");
    // SAFETY: a NUL-terminated path on our stack.
    if unsafe { libc::access(lists.ptr(), libc::F_OK) } != 0 {
        return descendants_by_scan(me, found);
    }
    let mut i = 0;
    let mut parent = Some(me);
    while let Some(p) = parent {
        each_numeric_entry(&Path::new().s(b"/proc/").n(p).s(b"/task"), |tid| {
            // A child belongs to the thread that forked it, and an orphan to whichever
            // thread of the subreaper took it. A list read while it changes may miss a
            // child; callers look again until none is left.
            let list = Path::new()
                .s(b"/proc/")
                .n(p)
                .s(b"/task/")
                .n(tid)
                .s(b"/children");
            each_number(&list, |c| {
                if c != me && !found.contains(c) {
                    found.push(c, p);
                }
            });
        });
        parent = found.as_slice().get(i).map(|&(pid, _)| pid);
        i += 1;
    }
}

/// The descendants of `me` found by reading every process's parent link in /proc; only
/// for kernels without children lists (see [`descendants`]). A pass adds every process
/// whose parent is already known; passes repeat until one adds nothing.
fn descendants_by_scan(me: i32, found: &mut Found) {
    for _ in 0..64 {
        let before = found.len;
        each_numeric_entry(&Path::new().s(b"/proc"), |pid| {
            if pid == me || found.contains(pid) {
                return;
            }
            if let Some(pp) = parent_pid(pid)
                && (pp == me || found.contains(pp))
            {
                found.push(pid, pp);
            }
        });
        if found.len == before {
            return;
        }
    }
}

fn kill_group(pgid: i32, sig: i32) {
    // SAFETY: a signal to a process group we created; ESRCH (gone) is fine.
    unsafe {
        libc::killpg(pgid, sig);
    }
}

/// Sends `sig` to a descendant found under `parent`.
///
/// A child of this process keeps its pid until it is reaped here, so `kill` is safe. A
/// deeper descendant may end, be reaped by its own parent and have its pid reused between
/// the listing and the signal, so it is signalled through a pidfd (see
/// [`signal_by_pidfd`]); `kill` remains only for a kernel without pidfds (before 5.3).
fn signal_descendant(me: i32, pid: i32, parent: i32, sig: i32) {
    if parent != me && signal_by_pidfd(pid, [parent, me], sig) {
        return;
    }
    // SAFETY: a signal to our own descendant; ESRCH (gone) is fine.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Opens `pid` as a pidfd, checks that it is still a child of one of `parents` and sends
/// `sig` through the pidfd. The check reads `/proc` after the open: if the pid was reused
/// in between, the process the pidfd refers to has ended and the send fails (ESRCH), so
/// a stranger is never signalled. `false` when the kernel has no pidfds.
#[cfg(target_os = "linux")]
fn signal_by_pidfd(pid: i32, parents: [i32; 2], sig: i32) -> bool {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS);
    }
    let fd = fd as libc::c_int;
    if parent_pid(pid).is_some_and(|pp| parents.contains(&pp)) {
        // SAFETY: a signal through a pidfd we own, without a siginfo.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd,
                sig,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
        }
    }
    close(fd);
    true
}

#[cfg(not(target_os = "linux"))]
fn signal_by_pidfd(_pid: i32, _parents: [i32; 2], _sig: i32) -> bool {
    false
}

/// Sends `sig` to the command's group (when known) and to every descendant that left it.
pub(super) fn signal_tree(pgid: Option<i32>, sig: i32) {
    if let Some(g) = pgid {
        kill_group(g, sig);
    }
    // SAFETY: getpid takes nothing.
    let me = unsafe { libc::getpid() };
    let mut found = Found::new();
    descendants(&mut found);
    for &(pid, parent) in found.as_slice() {
        signal_descendant(me, pid, parent, sig);
    }
}

/// Reaps every exited child and says whether any child is left (`waitpid` ends in ECHILD
/// when none is). As a child subreaper this process inherits every descendant whose parent
/// died, so no child left means no descendant left.
pub(super) fn children_left() -> bool {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: waitpid on any child with WNOHANG; status is ours.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid > 0 {
            continue;
        }
        if pid == 0 {
            return true;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return false;
        }
    }
}

/// Stops every descendant left: TERM, then KILL once `grace` has passed; returns when none
/// is left (no child of this subreaper, live or unreaped).
pub(super) fn clear_descendants(pgid: Option<i32>, grace: Duration) {
    let kill_at = Instant::now().checked_add(grace);
    let mut termed = false;
    while children_left() {
        let due = kill_at.is_none_or(|t| Instant::now() >= t);
        let sig = if termed && !due {
            0
        } else if termed {
            libc::SIGKILL
        } else {
            libc::SIGTERM
        };
        if sig != 0 {
            signal_tree(pgid, sig);
        }
        termed = true;
        let wait = if sig == libc::SIGKILL {
            Duration::from_millis(10)
        } else {
            kill_at
                .map_or(Duration::ZERO, |t| {
                    t.saturating_duration_since(Instant::now())
                })
                .min(Duration::from_millis(50))
                .max(Duration::from_millis(1))
        };
        super::wait_signal(&super::sigset(&[libc::SIGCHLD]), wait);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_built_with_their_numbers() {
        let p = Path::new()
            .s(b"/proc/")
            .n(4096)
            .s(b"/task/")
            .n(7)
            .s(b"/children");
        assert_eq!(&p.buf[..p.len + 1], b"/proc/4096/task/7/children\0");
        let z = Path::new().n(0);
        assert_eq!(&z.buf[..z.len], b"0");
    }

    #[test]
    fn the_parent_of_this_process_is_read_from_proc() {
        assert_eq!(
            parent_pid(std::process::id() as i32),
            Some(std::os::unix::process::parent_id() as i32)
        );
    }

    #[test]
    fn a_child_is_found_by_both_walks() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let pid = child.id() as i32;
        let mut found = Found::new();
        descendants(&mut found);
        assert!(found.contains(pid), "children lists");
        let mut scanned = Found::new();
        descendants_by_scan(std::process::id() as i32, &mut scanned);
        assert!(scanned.contains(pid), "scan");
        let _ = child.kill();
        let _ = child.wait();
    }
}
