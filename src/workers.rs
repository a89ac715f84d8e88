//! One process-wide pool of worker threads, and teams that bound how many of them a call
//! uses.
//!
//! A server calls the core from many request threads with whatever `threads` each asks
//! for, and forks worker processes after importing it. So:
//!
//! * **One pool, sized once.** The first parallel call builds the pool with the size it is
//!   given (the Python layer passes `MMFAST_NUM_THREADS`, else the cores); later sizes are
//!   ignored, so distinct `threads` values never pile up threads of their own. Idle workers
//!   sleep on a condition variable and cost no CPU.
//! * **A team per call.** [`run`] hands `count` tasks to a team of at most `threads`
//!   threads: the calling thread, which always takes part, and up to `threads - 1` pool
//!   workers, asked for only while there is work they could take. A task may split its
//!   work into bands with [`bands`]; the team's idle members take them. Work never leaves
//!   the team, so one call runs on at most `threads` threads, and concurrent calls share
//!   the pool. With `threads == 1` (or a single task without bands) no worker is woken.
//! * **Fork-safe.** A forked child inherits the pool's memory but none of its threads. The
//!   pool records the pid that built it; the first call in a child sees another pid and
//!   builds a fresh pool (the stale one is leaked: touching it could block on a lock that a
//!   thread which does not exist in the child held at the fork).
//!
//! Tasks and bands borrow the caller's stack: [`run`] and [`bands`] return only once every
//! member has finished with what they borrowed. A panic in a task or band is caught on the
//! thread that ran it and resumed on the caller's once the team is done.

use std::any::Any;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// The most threads a pool holds, whatever it is asked for: beyond the cores they only
/// cost memory, and a size from a request must not spawn unbounded threads.
pub const MAX_THREADS: usize = 256;

/// `&dyn Fn(usize)` with its lifetime erased, so a team can hold it while its owner (the
/// frame of [`run`] or [`bands`]) waits for the team to finish with it.
#[derive(Clone, Copy)]
struct Work(*const (dyn Fn(usize) + Sync));

// SAFETY: the closure behind the pointer is `Sync`, and its owner keeps it alive until no
// member can reach it any more (see `run` and `bands`).
unsafe impl Send for Work {}

impl Work {
    fn new<'a>(work: &'a (dyn Fn(usize) + Sync + 'a)) -> Self {
        let work: *const (dyn Fn(usize) + Sync + 'a) = work;
        // SAFETY: only the trait object's lifetime bound changes (an `as` cast may not
        // extend it); callers uphold it by waiting for their work to finish (see `Work`).
        #[allow(clippy::transmute_ptr_to_ptr)]
        Self(unsafe {
            std::mem::transmute::<*const (dyn Fn(usize) + Sync + 'a), *const (dyn Fn(usize) + Sync)>(work)
        })
    }

    /// # Safety
    /// The owner of the closure must still be waiting for it (see `run` and `bands`).
    unsafe fn call(self, index: usize) {
        // SAFETY: by the caller's contract the closure is alive.
        unsafe { (*self.0)(index) }
    }
}

/// Bands one task published with [`bands`]: those not yet handed out, and those unfinished.
struct Bands {
    id: u64,
    work: Work,
    next: usize,
    count: usize,
    unfinished: usize,
    panic: Option<Box<dyn Any + Send>>,
}

/// What the members of a team share, behind one lock: a call's tasks, the bands its tasks
/// publish, and who takes part.
struct State {
    task: Work,
    next: usize,
    count: usize,
    unfinished: usize,
    bands: Vec<Bands>,
    next_band_id: u64,
    /// Threads inside `Team::help`, the caller included.
    members: usize,
    /// The most members (`threads` of the call).
    limit: usize,
    /// Workers asked to join so far.
    requested: usize,
    /// Set once the caller has seen every task finish: later arrivals leave at once.
    closed: bool,
    panic: Option<Box<dyn Any + Send>>,
}

/// One call's team.
struct Team {
    pool: &'static Pool,
    state: Mutex<State>,
    changed: Condvar,
}

thread_local! {
    /// The team whose work this thread is running, for [`bands`].
    static CURRENT: RefCell<Option<Arc<Team>>> = const { RefCell::new(None) };
}

/// What a member takes next.
enum Next {
    Task(Work, usize),
    Band(Work, u64, usize),
    Done,
}

impl Team {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes part until every task has finished, unless the team is full or closed.
    fn help(self: &Arc<Self>) {
        {
            let mut s = self.lock();
            if s.closed || s.members >= s.limit {
                return;
            }
            s.members += 1;
        }
        let outer = CURRENT.with(|c| c.replace(Some(Arc::clone(self))));
        loop {
            let next = {
                let mut s = self.lock();
                loop {
                    if let Some(b) = s.bands.iter_mut().find(|b| b.next < b.count) {
                        b.next += 1;
                        break Next::Band(b.work, b.id, b.next - 1);
                    }
                    if s.next < s.count {
                        s.next += 1;
                        break Next::Task(s.task, s.next - 1);
                    }
                    if s.unfinished == 0 {
                        break Next::Done;
                    }
                    // A running task may still publish bands.
                    s = self.changed.wait(s).unwrap_or_else(PoisonError::into_inner);
                }
            };
            match next {
                Next::Done => break,
                Next::Task(work, index) => {
                    // SAFETY: the task is unfinished, so `run` is still waiting for it.
                    let result = catch_unwind(AssertUnwindSafe(|| unsafe { work.call(index) }));
                    let mut s = self.lock();
                    if let Err(payload) = result {
                        s.panic.get_or_insert(payload);
                    }
                    s.unfinished -= 1;
                    if s.unfinished == 0 {
                        self.changed.notify_all();
                    }
                }
                Next::Band(work, id, index) => self.run_band(work, id, index),
            }
        }
        CURRENT.with(|c| c.replace(outer));
        let mut s = self.lock();
        s.members -= 1;
        self.changed.notify_all();
    }

    /// Runs one band and counts it finished.
    fn run_band(&self, work: Work, id: u64, index: usize) {
        // SAFETY: the band is unfinished, so its owner in `bands` is still waiting for it.
        let result = catch_unwind(AssertUnwindSafe(|| unsafe { work.call(index) }));
        let mut s = self.lock();
        let b = s
            .bands
            .iter_mut()
            .find(|b| b.id == id)
            .expect("an unfinished band's entry");
        if let Err(payload) = result {
            b.panic.get_or_insert(payload);
        }
        b.unfinished -= 1;
        if b.unfinished == 0 {
            self.changed.notify_all();
        }
    }
}

/// The process's pool: its workers wait for teams to help.
struct Pool {
    pid: u32,
    /// Workers (the calling thread of each call is not one of them).
    workers: usize,
    queue: Mutex<VecDeque<Arc<Team>>>,
    wake: Condvar,
}

static POOL: AtomicPtr<Pool> = AtomicPtr::new(ptr::null_mut());

impl Pool {
    fn lock(&self) -> MutexGuard<'_, VecDeque<Arc<Team>>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The pool of this process, built with `threads` threads (workers and a caller) by
    /// the first call that needs one.
    fn get(threads: usize) -> &'static Pool {
        let pid = std::process::id();
        loop {
            let current = POOL.load(Ordering::Acquire);
            // SAFETY: pools are leaked, never freed, so a published pointer stays valid.
            if let Some(pool) = unsafe { current.as_ref() } {
                if pool.pid == pid {
                    return pool;
                }
            }
            let fresh = Box::into_raw(Box::new(Pool {
                pid,
                workers: threads.clamp(1, MAX_THREADS) - 1,
                queue: Mutex::new(VecDeque::new()),
                wake: Condvar::new(),
            }));
            match POOL.compare_exchange(current, fresh, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    // SAFETY: just published, and never freed.
                    let pool: &'static Pool = unsafe { &*fresh };
                    for i in 0..pool.workers {
                        // A worker that cannot start leaves its teams to their callers, who
                        // do all the work themselves if need be.
                        let _ = std::thread::Builder::new()
                            .name(format!("mmfast-{i}"))
                            .spawn(move || pool.work());
                    }
                    return pool;
                }
                // Another thread of this process published a pool first: use that one.
                // SAFETY: `fresh` was never shared.
                Err(_) => drop(unsafe { Box::from_raw(fresh) }),
            }
        }
    }

    /// A worker's life: help each team it is handed, sleep while there is none.
    fn work(&self) {
        loop {
            let team = {
                let mut queue = self.lock();
                loop {
                    if let Some(team) = queue.pop_front() {
                        break team;
                    }
                    queue = self.wake.wait(queue).unwrap_or_else(PoisonError::into_inner);
                }
            };
            team.help();
        }
    }

    /// Asks up to `n` workers to join `team`.
    fn request(&self, team: &Arc<Team>, n: usize) {
        if n == 0 {
            return;
        }
        let mut queue = self.lock();
        for _ in 0..n {
            queue.push_back(Arc::clone(team));
        }
        drop(queue);
        if n == 1 {
            self.wake.notify_one();
        } else {
            self.wake.notify_all();
        }
    }

    /// Drops the requests for `team` no worker has taken.
    fn withdraw(&self, team: &Arc<Team>) {
        self.lock().retain(|t| !Arc::ptr_eq(t, team));
    }
}

/// Runs `task(i)` for every `i` in `0..count` on a team of at most `threads` threads of the
/// process's pool (built with `pool_threads` threads by the first call that needs one),
/// the calling thread included; returns when every task has finished.
///
/// With `threads <= 1` or a single task, everything runs on the calling thread, in order.
///
/// # Panics
/// A panic in a task is resumed here once the team has finished.
pub fn run(threads: usize, pool_threads: usize, count: usize, task: &(dyn Fn(usize) + Sync)) {
    if threads <= 1 || count == 0 || (count == 1 && pool_threads <= 1) {
        (0..count).for_each(task);
        return;
    }
    let pool = Pool::get(pool_threads);
    let limit = threads.min(pool.workers + 1);
    if limit <= 1 {
        (0..count).for_each(task);
        return;
    }
    let team = Arc::new(Team {
        pool,
        state: Mutex::new(State {
            task: Work::new(task),
            next: 0,
            count,
            unfinished: count,
            bands: Vec::new(),
            next_band_id: 0,
            members: 0,
            limit,
            requested: (count - 1).min(limit - 1),
            closed: false,
            panic: None,
        }),
        changed: Condvar::new(),
    });
    pool.request(&team, (count - 1).min(limit - 1));
    team.help();
    let panic = {
        let mut s = team.lock();
        s.closed = true;
        while s.members > 0 {
            s = team.changed.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
        s.panic.take()
    };
    // From here no member can reach `task`: every task finished, and late arrivals see
    // `closed`.
    pool.withdraw(&team);
    if let Some(payload) = panic {
        resume_unwind(payload);
    }
}

/// Members of the calling thread's team, for sizing bands: 1 outside a team.
#[must_use]
pub fn team_size() -> usize {
    CURRENT.with(|c| c.borrow().as_ref().map_or(1, |team| team.lock().limit))
}

/// Runs `band(i)` for every `i` in `0..count`, on the calling thread and, inside a task of
/// [`run`], on members of its team with nothing else to do; returns when every band has
/// finished.
///
/// # Panics
/// A panic in a band is resumed here once every band has finished.
pub fn bands(count: usize, band: &(dyn Fn(usize) + Sync)) {
    let team = CURRENT.with(|c| c.borrow().clone());
    let Some(team) = team.filter(|_| count >= 2) else {
        (0..count).for_each(band);
        return;
    };
    let id = {
        let mut s = team.lock();
        let id = s.next_band_id;
        s.next_band_id += 1;
        s.bands.push(Bands {
            id,
            work: Work::new(band),
            next: 0,
            count,
            unfinished: count,
            panic: None,
        });
        // More hands, if the team may have them.
        let wanted = (count - 1).min(s.limit - 1).saturating_sub(s.requested);
        s.requested += wanted;
        team.changed.notify_all();
        drop(s);
        team.pool.request(&team, wanted);
        id
    };
    let own = |s: &State| -> usize {
        s.bands
            .iter()
            .position(|b| b.id == id)
            .expect("bands stay listed until their owner is done")
    };
    let mut panic = None;
    loop {
        let index = {
            let mut s = team.lock();
            let at = own(&s);
            let b = &mut s.bands[at];
            if b.next < b.count {
                b.next += 1;
                Some(b.next - 1)
            } else {
                while s.bands[own(&s)].unfinished > 0 {
                    s = team.changed.wait(s).unwrap_or_else(PoisonError::into_inner);
                }
                let at = own(&s);
                let done = s.bands.swap_remove(at);
                panic = panic.or(done.panic);
                None
            }
        };
        let Some(index) = index else { break };
        let result = catch_unwind(AssertUnwindSafe(|| band(index)));
        let mut s = team.lock();
        let at = own(&s);
        s.bands[at].unfinished -= 1;
        if let Err(payload) = result {
            panic.get_or_insert(payload);
        }
    }
    // Every band has finished and the entry is gone: no member can reach `band` any more.
    if let Some(payload) = panic {
        resume_unwind(payload);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::atomic::AtomicUsize;
    use std::thread::ThreadId;
    use std::time::Duration;

    /// Every test builds (or reuses) a pool of this many threads.
    const POOL: usize = 4;

    /// Records how many threads are inside `enter`..`leave` at once, and which.
    #[derive(Default)]
    struct Occupancy {
        now: AtomicUsize,
        most: AtomicUsize,
        threads: Mutex<HashSet<ThreadId>>,
    }

    impl Occupancy {
        fn visit(&self, work: impl FnOnce()) {
            let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            self.threads.lock().unwrap().insert(std::thread::current().id());
            work();
            self.now.fetch_sub(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn every_task_runs_once_for_any_team() {
        for threads in 1..=6 {
            for count in [0, 1, 2, 3, 7, 50] {
                let runs: Vec<AtomicUsize> = (0..count).map(|_| AtomicUsize::new(0)).collect();
                run(threads, POOL, count, &|i| {
                    runs[i].fetch_add(1, Ordering::SeqCst);
                });
                assert!(
                    runs.iter().all(|r| r.load(Ordering::SeqCst) == 1),
                    "{threads} {count}"
                );
            }
        }
    }

    #[test]
    fn a_call_uses_at_most_its_threads_bands_included() {
        for threads in 1..=POOL + 2 {
            let seen = Occupancy::default();
            let bands_run = AtomicUsize::new(0);
            run(threads, POOL, 6, &|_| {
                seen.visit(|| std::thread::sleep(Duration::from_millis(2)));
                // Each task splits work into bands the team's idle members take.
                bands(5, &|_| {
                    seen.visit(|| std::thread::sleep(Duration::from_millis(2)));
                    bands_run.fetch_add(1, Ordering::SeqCst);
                });
            });
            assert_eq!(bands_run.load(Ordering::SeqCst), 30);
            let limit = threads.min(POOL);
            assert!(seen.most.load(Ordering::SeqCst) <= limit, "threads={threads}");
            assert!(seen.threads.lock().unwrap().len() <= limit, "threads={threads}");
        }
    }

    #[test]
    fn one_task_spreads_its_bands_over_the_team() {
        let seen = Occupancy::default();
        run(2, POOL, 1, &|_| {
            bands(8, &|_| {
                seen.visit(|| std::thread::sleep(Duration::from_millis(5)));
            });
        });
        assert_eq!(seen.threads.lock().unwrap().len(), 2);
        // Outside a team, bands run in order on the calling thread.
        let order = Mutex::new(Vec::new());
        bands(4, &|i| order.lock().unwrap().push(i));
        assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3]);
        assert_eq!(team_size(), 1);
    }

    #[test]
    fn concurrent_calls_share_the_pool() {
        let total = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for caller in 0..8 {
                let total = &total;
                scope.spawn(move || {
                    for _ in 0..20 {
                        run(1 + caller % 4, POOL, 5, &|_| {
                            bands(3, &|_| {
                                total.fetch_add(1, Ordering::SeqCst);
                            });
                        });
                    }
                });
            }
        });
        assert_eq!(total.load(Ordering::SeqCst), 8 * 20 * 5 * 3);
    }

    #[test]
    fn panics_reach_the_caller_and_leave_the_pool_working() {
        for threads in [1, 2, 4] {
            let caught = catch_unwind(|| {
                run(threads, POOL, 4, &|i| {
                    bands(3, &|j| assert!(!(i == 2 && j == 1), "band {i}.{j}"));
                });
            });
            let payload = caught.expect_err("the panic comes back");
            let message = payload.downcast_ref::<String>().expect("a formatted message");
            assert_eq!(message, "band 2.1");
            let runs = AtomicUsize::new(0);
            run(threads, POOL, 4, &|_| {
                runs.fetch_add(1, Ordering::SeqCst);
            });
            assert_eq!(runs.load(Ordering::SeqCst), 4);
        }
    }
}
