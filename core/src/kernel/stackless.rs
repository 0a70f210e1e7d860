//! The kernel's side of stackless bodies (the handler actors of the layer
//! above): the one worker plugin that runs them in every pass, the
//! [`Driver`] through which that plugin reaches a worker's bodies, the
//! per-worker envelope lanes that carry work to them, and reserving,
//! ending and looking up their slots.
//!
//! A runtime has at most one plugin, installed on first use. Each worker
//! makes its own state for it on its next pass and calls
//! [`WorkerPlugin::pass`] once per pass, after its processes ran. A
//! stackless slot sits `Parked` while its worker is not running it; a stop
//! request (the one wildcard wake) queues it like a process, and when the
//! worker pops it the kernel asks the plugin what to do
//! ([`WorkerPlugin::woken`]) instead of switching to a stack. The body's
//! end goes through the kernel's finalize like a process's: death hooks
//! (monitors, links, the registry) see one kind of pid.
//!
//! # The cell and the driver
//!
//! A stackless body keeps its state in its slot's *cell*: one allocation
//! (the plugin's value, whatever its type) and a `'static` description the
//! plugin reads it through. Only the worker's driver touches a cell, and
//! only through a [`Driver`]: a token the kernel makes for the plugin's
//! share of a pass, for `woken` and for the admin step, borrowed for that
//! call alone and never `Send`. It hands out the cell of one of its
//! worker's bodies inside a closure. A loan may nest inside the loan of
//! another cell (a handler's send putting a message straight into another
//! actor's mailbox), one level deep; a request for a cell that is lent out
//! already is refused, so a `&mut` to a cell never has a twin.

use crate::kernel::atomic::Ordering;
use crate::kernel::current::{Current, Here};
use crate::kernel::error::SpawnError;
use crate::kernel::exit::ExitReason;
use crate::kernel::pid::Pid;
use crate::kernel::preempt::NoPreempt;
use crate::kernel::ring::envelope::{Deliver, Envelope, EnvelopeQueue, Family};
use crate::kernel::runtime::{Admin, ProcessView, Shared};
use crate::kernel::slab::{Slot, STOP_NONE};
use crate::kernel::state::{State, Unpark};
use crate::kernel::timer::Timers;
use crate::kernel::worker::{self, WorkerCore};
use alloc::boxed::Box;
use alloc::sync::Arc;
use core::any::{Any, TypeId};
use core::cell::{Cell, RefCell};
use core::marker::PhantomData;
use smarm_platform::Nanos;

/// Work a layer above the kernel does in each worker's pass.
pub(crate) trait WorkerPlugin: Any + Send + Sync {
    /// The plugin's state for worker `worker`, made on that worker's first
    /// pass after the plugin is installed. Only that worker's driver
    /// touches it ([`Driver::state`]).
    fn worker_state(&self, shared: &Arc<Shared>, worker: usize) -> Box<dyn Any>;

    /// The plugin's share of one pass of the driver's worker, run after
    /// the worker's processes. `budget` is the configured ingress budget
    /// (`usize::MAX` for unlimited). Returns whether it did work or has
    /// work left that the next pass will do (so the driver must not park).
    fn pass(&self, driver: &Driver<'_>, budget: usize) -> bool;

    /// The stackless body `pid` of the driver's worker was queued (a stop
    /// request, or an end the plugin asked for while it was queued) and the
    /// worker has taken it off its queue. `Some(reason)`: end it now with
    /// that reason; `None`: it goes back to `Parked`.
    fn woken(&self, driver: &Driver<'_>, pid: Pid) -> Option<ExitReason>;
}

/// What a stackless body is, as its plugin describes it when it reserves
/// the body's slot: readable from any thread (for lookups that check a
/// type), unlike the body's cell. One `'static` description per type.
#[derive(Debug)]
pub(crate) struct BodyType {
    /// The type's id.
    pub(crate) id: fn() -> TypeId,
    /// The type's name, for errors.
    pub(crate) name: fn() -> &'static str,
}

/// The context an envelope for a stackless body is delivered with: the
/// driver of the target's worker.
pub(crate) struct OnDriver;

impl Family for OnDriver {
    type Of<'a> = Driver<'a>;
}

/// An envelope delivered on a worker's driver.
pub(crate) type DriverEnvelope = Envelope<OnDriver>;

/// Which of a worker's envelope lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lane {
    /// Administrative commands, the kernel's ([`Admin`]) and the plugin's:
    /// drained first in every pass, before any process runs.
    Admin,
    /// Bodies to install in reserved slots.
    Install,
    /// Mail for the worker's bodies from other workers and from outside.
    Mail,
}

/// One worker's envelope lanes: any thread pushes, the worker's driver
/// pops.
pub(crate) struct Lanes {
    admin: EnvelopeQueue<OnDriver>,
    install: EnvelopeQueue<OnDriver>,
    mail: EnvelopeQueue<OnDriver>,
}

impl Lanes {
    pub(crate) fn new() -> Lanes {
        Lanes { admin: EnvelopeQueue::new(), install: EnvelopeQueue::new(), mail: EnvelopeQueue::new() }
    }

    /// Whether any lane holds an envelope (a push finished before the
    /// caller's last fence is seen).
    ///
    /// # Safety
    ///
    /// The caller is the lanes' one consumer (the worker's driver, outside
    /// its pass): no `pop` or `is_empty` of them runs at the same time.
    pub(crate) unsafe fn has_any(&self) -> bool {
        // SAFETY: the one consumer (the contract).
        unsafe { !(self.admin.is_empty() && self.install.is_empty() && self.mail.is_empty()) }
    }

    fn lane(&self, lane: Lane) -> &EnvelopeQueue<OnDriver> {
        match lane {
            Lane::Admin => &self.admin,
            Lane::Install => &self.install,
            Lane::Mail => &self.mail,
        }
    }
}

impl Deliver<OnDriver> for Admin {
    fn deliver(self, _dest: Pid, driver: &Driver<'_>) -> Result<(), Self> {
        match self {
            Admin::StopAll => worker::stop_all_on(driver.shared, driver.worker),
        }
        Ok(())
    }
}

/// What a stackless slot's cell holds once its body is installed: the
/// plugin's value (one allocation) and the `'static` description the
/// plugin reads it through, each with its type recorded when the cell was
/// made — so reading them back compares two constants instead of asking
/// the value for its type through its vtable on every access.
pub(crate) struct StacklessCell {
    value: Box<dyn Any + Send>,
    value_type: TypeId,
    meta: &'static (dyn Any + Send + Sync),
    meta_type: TypeId,
}

impl StacklessCell {
    /// A cell holding `value`, read through `meta`.
    pub(crate) fn new<T: Any + Send, M: Any + Send + Sync>(value: Box<T>, meta: &'static M) -> StacklessCell {
        StacklessCell { value, value_type: TypeId::of::<T>(), meta, meta_type: TypeId::of::<M>() }
    }

    /// The value, if it is a `T` (taken out of the cell).
    pub(crate) fn into_value<T: Any>(self) -> Option<Box<T>> {
        self.value.downcast::<T>().ok()
    }

    /// The description, if it is an `M`.
    pub(crate) fn meta<M: Any>(&self) -> Option<&'static M> {
        if self.meta_type != TypeId::of::<M>() {
            return None;
        }
        let meta: *const (dyn Any + Send + Sync) = self.meta;
        // SAFETY: `meta_type` is the `TypeId` of the concrete type `meta`
        // was made from (`new` records both from the same `M`, and the
        // fields never change), so it points to an `M`, for `'static`.
        Some(unsafe { &*meta.cast::<M>() })
    }
}

/// A lent cell: its value and description, read as the types the plugin
/// knows them by.
pub(crate) struct CellRef<'c> {
    cell: &'c mut StacklessCell,
}

impl<'c> CellRef<'c> {
    /// The description, if it is an `M`.
    #[inline]
    pub(crate) fn meta<M: Any>(&self) -> Option<&'static M> {
        self.cell.meta::<M>()
    }

    /// The value, if it is a `T`.
    #[inline]
    pub(crate) fn value<T: Any>(self) -> Option<&'c mut T> {
        if self.cell.value_type != TypeId::of::<T>() {
            return None;
        }
        let value: *mut (dyn Any + Send) = &mut *self.cell.value;
        // SAFETY: `value_type` is the `TypeId` of the boxed value's
        // concrete type (recorded by `new` from the same `T`; a value
        // behind `&mut dyn Any` can be changed but never replaced by one
        // of another type), and the `&mut` is the loan's, for `'c`.
        Some(unsafe { &mut *value.cast::<T>() })
    }
}

/// The plugin and one worker's state for it, made on the worker's first
/// pass after the plugin is installed.
pub(crate) struct OnWorker {
    plugin: Arc<dyn WorkerPlugin>,
    state: Box<dyn Any>,
    /// The `TypeId` of `state`'s concrete type, read once when it is made:
    /// a look-up of the state by type (every send and every delivery) is
    /// then a comparison with this field, not a dynamic call.
    state_type: TypeId,
    /// How many cells of this worker are lent out ([`Driver::with_cell`]):
    /// at most two at once, of two different slots.
    loans: Cell<u8>,
    /// The slot index of the outer loan, while one is out.
    outer_loan: Cell<u32>,
}

impl OnWorker {
    pub(crate) fn new(plugin: Arc<dyn WorkerPlugin>, shared: &Arc<Shared>, worker: usize) -> OnWorker {
        let state = plugin.worker_state(shared, worker);
        let state_type = (*state).type_id();
        OnWorker { plugin, state, state_type, loans: Cell::new(0), outer_loan: Cell::new(0) }
    }

    /// The plugin's state for this worker, if it is a `T`.
    #[inline]
    pub(crate) fn state<T: Any>(&self) -> Option<&T> {
        if self.state_type != TypeId::of::<T>() {
            return None;
        }
        let state: *const dyn Any = &*self.state;
        // SAFETY: `state_type` is the `TypeId` of the boxed state's
        // concrete type (read from the box itself by `new`; the box is
        // never replaced), so it points to a `T`, borrowed with `self`.
        Some(unsafe { &*state.cast::<T>() })
    }
}

/// Why a driver lent no cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoCell {
    /// No live stackless body of this worker has that pid.
    Dead,
    /// Reserved, its body not installed yet.
    Pending,
    /// That cell is lent out right now, or two cells of this worker are.
    Lent,
}

/// The right to one worker's stackless bodies: made by the kernel on the
/// thread driving that worker, for one call of the plugin (or one admin
/// step, or one send from the worker's own pass or one of its processes:
/// [`Driver::with_state_in`], [`Driver::with_state_for_send_in`]); never
/// `Send`, never outliving the call, never held across a switch. Every
/// driver of a worker shares its loan count, so two drivers of one worker
/// alive at once (a send's inside the pass's) lend no cell twice.
pub(crate) struct Driver<'a> {
    shared: &'a Shared,
    worker: usize,
    on: Option<&'a OnWorker>,
    /// The worker's timers, where the plugin's earliest deadline is kept.
    timers: &'a RefCell<Timers>,
    /// The worker's record of the code it runs.
    current: &'a Current,
    /// Made for a send from a running process
    /// ([`with_state_for_send_in`](Self::with_state_for_send_in)): what
    /// only the pass may read ([`process_view`](Self::process_view)) is
    /// refused.
    in_process: bool,
    /// Not `Send` or `Sync`: the right belongs to the driving thread.
    _here: PhantomData<*const ()>,
}

impl<'a> Driver<'a> {
    /// The driver of `core`'s worker, for the pass now running it.
    #[inline]
    fn of(core: &'a WorkerCore, shared: &'a Shared) -> Driver<'a> {
        Driver::with_on(core, shared, core.stackless())
    }

    /// [`of`](Self::of), with the worker's plugin record already looked up.
    #[inline]
    fn with_on(core: &'a WorkerCore, shared: &'a Shared, on: Option<&'a OnWorker>) -> Driver<'a> {
        Driver {
            shared,
            worker: core.id,
            on,
            timers: &core.timers,
            current: &core.current,
            in_process: false,
            _here: PhantomData,
        }
    }

    /// Runs `f` as the code of handler actor `pid`, as
    /// [`current::as_handler`](crate::kernel::current::as_handler) does,
    /// without looking the worker up again.
    #[inline]
    pub(crate) fn as_handler<R>(&self, pid: Pid, f: impl FnOnce() -> R) -> R {
        let previous = self.current.handling.replace(Some(pid));
        let result = f();
        self.current.handling.set(previous);
        result
    }

    /// Runs `f` with the plugin's state for the calling thread's worker,
    /// if it drives one of `shared`'s and has made that state, and with
    /// that worker's driver if no process runs (in a handler, or other
    /// code of the worker's own pass): one look at the worker for both.
    /// What `f` can reach through the driver is guarded as in any other
    /// call: a cell already lent out is refused.
    ///
    /// `here` is the calling thread's worker record, looked up by the
    /// caller.
    #[inline]
    pub(crate) fn with_state_in<T: Any, R>(
        shared: &Shared,
        here: Here,
        f: impl FnOnce(&T, Option<&Driver<'_>>) -> R,
    ) -> Option<R> {
        Self::with_state_for_send_in(shared, here, |state, driver| {
            f(state, (!driver.in_process).then_some(driver))
        })
    }

    /// [`with_state_in`](Self::with_state_in) for a send into a mailbox:
    /// the driver is given to a running process of the worker too, not
    /// only to its pass.
    ///
    /// That is sound because a process runs only in the kernel's process
    /// step, never inside the plugin's pass, so no cell of its worker is
    /// lent out while it runs, and the loans `f` takes are counted as any
    /// other. The caller keeps every loan off a switch: it runs `f` with
    /// preemption off, and the code it runs inside a loan calls no user
    /// code (a message it cannot place is dropped after its loan ends).
    #[inline]
    pub(crate) fn with_state_for_send_in<T: Any, R>(
        shared: &Shared,
        here: Here,
        f: impl FnOnce(&T, &Driver<'_>) -> R,
    ) -> Option<R> {
        let core = worker::core_in(&here)?;
        if !core.is(shared, core.id) {
            return None;
        }
        let on = core.stackless()?;
        let state = on.state::<T>()?;
        let driver = Driver {
            in_process: core.current.running.get().is_some(),
            ..Driver::with_on(core, shared, Some(on))
        };
        Some(f(state, &driver))
    }

    /// Now, on the platform clock the worker's timers are on.
    pub(crate) fn now(&self) -> Nanos {
        self.shared.platform.now()
    }

    /// Records the earliest deadline of the plugin's own timers of this
    /// worker (`None`: none), so that the host wakes the worker for it.
    pub(crate) fn set_timer_deadline(&self, deadline: Option<Nanos>) {
        self.timers.borrow_mut().set_plugin_deadline(deadline);
    }

    /// The runtime.
    pub(crate) fn shared(&self) -> &'a Shared {
        self.shared
    }

    /// The plugin's state for this worker, if the plugin is installed and
    /// its state is a `T`.
    #[inline]
    pub(crate) fn state<T: Any>(&self) -> Option<&'a T> {
        self.on?.state::<T>()
    }

    /// Takes the oldest envelope of this worker's `lane`.
    pub(crate) fn pop(&self, lane: Lane) -> Option<DriverEnvelope> {
        // SAFETY: a driver is made only on the thread driving its worker
        // (one at a time: `Worker::try_tick` takes `&mut`), and never
        // leaves it: that thread is the lanes' one consumer, and a pop
        // does not call out, so two never overlap.
        unsafe { self.shared.workers[self.worker].lanes.lane(lane).pop() }
    }

    /// Whether this worker's `lane` is empty.
    pub(crate) fn is_empty(&self, lane: Lane) -> bool {
        // SAFETY: as in `pop`.
        unsafe { self.shared.workers[self.worker].lanes.lane(lane).is_empty() }
    }

    /// What this worker knows of the live process in slot `index`, if the
    /// slot holds one of this worker's processes (`None` too from a
    /// process's send: the running process's own record is not settled).
    pub(crate) fn process_view(&self, index: u32) -> Option<ProcessView> {
        if self.in_process {
            return None;
        }
        // SAFETY: a driver exists only on its worker's driving thread, and
        // this one outside any process (`in_process` is false).
        unsafe { self.shared.process_view(index, self.worker) }
    }

    /// The slot of `pid` if it is a live stackless body of this worker.
    #[inline]
    fn own_slot(&self, pid: Pid) -> Option<&'a Slot> {
        let slot = self.shared.slot(pid.index())?;
        (self.shared.stackless_worker_of(slot, pid) == Some(self.worker)).then_some(slot)
    }

    /// Runs `f` on the cell of `pid`, a live stackless body of this worker,
    /// lent for the call: refused if that cell is lent out already, or if
    /// two cells are (a loan may nest inside the loan of another cell, as
    /// when a handler's send puts a message straight into the mailbox of
    /// another actor of its worker, but no deeper).
    #[inline]
    fn access<R>(&self, pid: Pid, f: impl FnOnce(&mut Option<StacklessCell>) -> R) -> Result<R, NoCell> {
        // No plugin: no stackless body was ever installed.
        let on = self.on.ok_or(NoCell::Dead)?;
        let slot = self.own_slot(pid).ok_or(NoCell::Dead)?;
        match on.loans.get() {
            0 => on.outer_loan.set(pid.index()),
            1 if on.outer_loan.get() != pid.index() => {}
            _ => return Err(NoCell::Lent),
        }
        on.loans.set(on.loans.get() + 1);
        /// Takes the loan back on every way out, an unwinding panic too.
        struct Return<'a>(&'a Cell<u8>);
        impl Drop for Return<'_> {
            fn drop(&mut self) {
                self.0.set(self.0.get() - 1);
            }
        }
        let _return = Return(&on.loans);
        // SAFETY: the slot holds a live stackless body of this worker, so
        // only this worker's driver touches its body, and we are that
        // driver, on the thread driving the worker (a `Driver` exists
        // nowhere else, and is never held across a switch). No
        // other reference into this slot's cell is live: no loan was out,
        // or the one that is is of another slot (loans nest, so that one
        // outlives this one), and no loan of this slot can be made until
        // `f` returns. Only the cell field is borrowed, not the rest of
        // the body.
        let cell = unsafe { &mut *core::ptr::addr_of_mut!((*slot.body.get()).cell) };
        Ok(f(cell))
    }

    /// Runs `f` on `pid`'s installed cell, lent for the call.
    #[inline]
    pub(crate) fn with_cell<R>(&self, pid: Pid, f: impl FnOnce(CellRef<'_>) -> R) -> Result<R, NoCell> {
        self.access(pid, |cell| cell.as_mut().map(|cell| f(CellRef { cell })))?.ok_or(NoCell::Pending)
    }

    /// Where `pid`'s cell stands.
    pub(crate) fn cell_state(&self, pid: Pid) -> Result<(), NoCell> {
        self.with_cell(pid, |_| ())
    }

    /// Installs `cell` in the reserved slot of `pid`; `Err` gives it back
    /// if `pid` is not a reserved, uninstalled body of this worker (a stop
    /// got there first).
    pub(crate) fn install(&self, pid: Pid, cell: StacklessCell) -> Result<(), StacklessCell> {
        let mut cell = Some(cell);
        let _ = self.access(pid, |slot| {
            if slot.is_none() {
                *slot = cell.take();
            }
        });
        match cell {
            Some(cell) => Err(cell),
            None => Ok(()),
        }
    }

    /// Takes `pid`'s installed cell out of its slot.
    pub(crate) fn take_cell(&self, pid: Pid) -> Option<StacklessCell> {
        self.access(pid, Option::take).ok()?
    }

    /// Ends stackless body `pid` of this worker with `reason`, outside
    /// [`WorkerPlugin::woken`]: `true` if it is now finalized; `false` if
    /// it is queued (a stop request got there first) — the worker will call
    /// `woken` for it, which should then end it — or not this worker's.
    pub(crate) fn end(&self, pid: Pid, reason: ExitReason) -> bool {
        if self.own_slot(pid).is_none() || self.on.is_some_and(|on| on.loans.get() > 0) {
            return false;
        }
        let slot = self.shared.slot_of(pid);
        if slot.state.unpark(pid.generation()) != Unpark::Enqueue {
            return false;
        }
        // The wildcard wake made it Queued and gave us the right to it.
        let ran = slot.state.begin_run(pid.generation());
        debug_assert!(ran.is_ok(), "a stackless slot we just queued was taken");
        self.finish(pid, reason);
        true
    }

    /// Ends the `Running` stackless body `pid` with `reason` (refined by a
    /// pending stop's reason, as a process's `Stopped` is) and finalizes
    /// it.
    fn finish(&self, pid: Pid, reason: ExitReason) {
        let slot = self.shared.slot_of(pid);
        // The cell is the plugin's: whatever it left is dropped off the
        // slot lock (a body's destructor may take locks).
        drop(self.access(pid, Option::take).ok().flatten());
        {
            let mut cold = slot.cold.lock();
            let stop_reason = cold.stop_reason.take();
            cold.exit = Some(match reason {
                ExitReason::Stopped => stop_reason.unwrap_or(ExitReason::Stopped),
                reason => reason,
            });
            slot.state.finish(pid.generation());
        }
        self.shared.finalize(pid.index(), pid.generation());
    }
}

/// Pass step: the admin lane of `core`'s worker, at most `budget`
/// commands. Returns whether there were any.
pub(crate) fn admin_step(core: &WorkerCore, shared: &Shared, budget: usize) -> bool {
    let driver = Driver::of(core, shared);
    let mut n = 0;
    while n < budget {
        let Some(envelope) = driver.pop(Lane::Admin) else { break };
        n += 1;
        // Admin payloads take their command whatever the target's state
        // (one that must wait for an install holds itself in the plugin's
        // state), so nothing comes back here.
        let given_back = envelope.deliver(&driver);
        debug_assert!(given_back.is_ok(), "an admin command was given back");
    }
    n > 0
}

/// Pass step: the plugin's share, if a plugin is installed.
pub(crate) fn plugin_step(core: &WorkerCore, shared: &Shared, budget: usize) -> bool {
    let driver = Driver::of(core, shared);
    match driver.on {
        Some(on) => on.plugin.pass(&driver, budget),
        None => false,
    }
}

/// A stackless body was queued — only a stop request or its plugin's own
/// end does that — and is now `Running`: the plugin says whether it ends;
/// if not, it goes back to `Parked`.
pub(crate) fn run_stackless(core: &WorkerCore, shared: &Shared, pid: Pid) {
    let slot = shared.slot_of(pid);
    let driver = Driver::of(core, shared);
    loop {
        let end = match driver.on {
            Some(on) => on.plugin.woken(&driver, pid),
            // Only a plugin makes stackless slots; none here means its
            // body can never run: end it.
            None => Some(ExitReason::Stopped),
        };
        if let Some(reason) = end {
            driver.finish(pid, reason);
            return;
        }
        // Back to Parked, unless a wake landed meanwhile: then ask again.
        let _ = slot.state.begin_wait(pid.generation());
        if slot.state.park(pid.generation()) == crate::kernel::state::Park::Parked {
            return;
        }
    }
}

impl Shared {
    /// Takes a slot for a stackless body on worker `worker` and returns
    /// its pid. The slot is `Parked` with no stack; it counts in `live`
    /// until it ends ([`Driver::end`], or a stop). The caller
    /// (the plugin) installs the body's cell on that worker's next pass
    /// ([`Driver::install`]).
    pub(crate) fn reserve_stackless(
        &self,
        worker: usize,
        body_type: &'static BodyType,
    ) -> Result<Pid, SpawnError> {
        if worker >= self.workers.len() {
            return Err(SpawnError::NoSuchWorker(worker));
        }
        let _np = NoPreempt::new();
        let index = self.take_slot()?;
        let slot = self.slot_at(index);
        let generation = slot.generation();
        slot.stackless.store(true, Ordering::Relaxed);
        slot.body_type.store(core::ptr::from_ref(body_type).cast_mut(), Ordering::Relaxed);
        slot.worker.store(worker, Ordering::Relaxed);
        // Release (inside the claim) publishes the body flag, its type and
        // the worker.
        let claimed = slot.state.claim_parked(generation);
        debug_assert!(claimed.is_ok(), "free-list slot {index} was not Vacant");
        Ok(Pid::from_parts(index, generation))
    }

    /// The reason a stop was requested of `pid` with, if one was and the
    /// pid is current: `Stopped` unless a link or an exit signal named
    /// another.
    pub(crate) fn stop_requested(&self, pid: Pid) -> Option<ExitReason> {
        let slot = self.slot(pid.index())?;
        if slot.stop.load(Ordering::Acquire) == STOP_NONE {
            return None;
        }
        let cold = slot.cold.lock();
        if slot.state.snapshot().generation() != pid.generation() {
            return None;
        }
        Some(cold.stop_reason.clone().unwrap_or(ExitReason::Stopped))
    }

    /// The worker of the live stackless body `pid`.
    #[inline]
    pub(crate) fn stackless_worker(&self, pid: Pid) -> Option<usize> {
        self.stackless_worker_of(self.slot(pid.index())?, pid)
    }

    /// The worker of the live stackless body `pid`, whose slot is `slot`.
    #[inline]
    fn stackless_worker_of(&self, slot: &Slot, pid: Pid) -> Option<usize> {
        // One snapshot: its Acquire pairs with the claim's Release, which
        // published the flag and the worker, both constant while live.
        let snap = slot.state.snapshot();
        if snap.generation() != pid.generation()
            || matches!(snap.state(), State::Vacant | State::Done)
            || !slot.stackless.load(Ordering::Relaxed)
        {
            return None;
        }
        Some(slot.worker.load(Ordering::Relaxed))
    }

    /// The type of the live stackless body `pid`, as its plugin described
    /// it; `None` if `pid` is not one (a process, or dead).
    pub(crate) fn stackless_type(&self, pid: Pid) -> Option<&'static BodyType> {
        let slot = self.slot(pid.index())?;
        self.stackless_worker_of(slot, pid)?;
        let body_type = slot.body_type.load(Ordering::Relaxed);
        // Re-checked after the read: a reclaim in between (another body's
        // type) is not taken for this pid's.
        if slot.state.snapshot().generation() != pid.generation() {
            return None;
        }
        // SAFETY: the field is only ever null or a `&'static BodyType`
        // (`reserve_stackless`, `Slot::reset`), so a non-null pointer is
        // valid for reads for `'static`.
        unsafe { body_type.as_ref() }
    }

    /// The pid of the live stackless body in slot `index`, if any.
    pub(crate) fn stackless_pid(&self, index: u32) -> Option<Pid> {
        let slot = self.slot(index)?;
        let pid = Pid::from_parts(index, slot.state.snapshot().generation());
        self.is_stackless(pid).then_some(pid)
    }

    /// Pushes `envelope` onto worker `worker`'s `lane` and tells its
    /// driver (a watching driver finds it there, `Shared::signal`).
    pub(crate) fn push_stackless(&self, worker: usize, lane: Lane, envelope: DriverEnvelope) {
        // Preemption off: a producer cut half-way through the push would
        // leave the lane looking empty until it runs again.
        let _np = NoPreempt::new();
        self.workers[worker].lanes.lane(lane).push(envelope);
        self.signal(worker);
    }

    /// Slots in the slab (live or not).
    pub(crate) fn slot_count(&self) -> u32 {
        self.slots.len() as u32
    }

    /// Whether `pid` names a live stackless body.
    pub(crate) fn is_stackless(&self, pid: Pid) -> bool {
        let Some(slot) = self.slot(pid.index()) else { return false };
        // The snapshot's Acquire pairs with the claim's Release, which
        // published the flag; re-checked after reading it, so a reclaim
        // in between is not mistaken for the pid's body.
        self.is_alive(pid)
            && slot.stackless.load(Ordering::Relaxed)
            && slot.state.snapshot().generation() == pid.generation()
    }

    /// Installs the runtime's worker plugin, once, and returns the one
    /// installed: the first caller's `make` wins (a racing loser's value
    /// is dropped unused). `None` if the installed plugin is not a `T`.
    pub(crate) fn install_plugin<T: WorkerPlugin>(&self, make: impl FnOnce() -> T) -> Option<&T> {
        if self.plugin.load(Ordering::Acquire).is_null() {
            let plugin: Arc<dyn WorkerPlugin> = Arc::new(make());
            let boxed = Box::into_raw(Box::new(plugin));
            // Release publishes the box to readers that Acquire the pointer.
            let won = self.plugin.compare_exchange(
                core::ptr::null_mut(),
                boxed,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
            if won.is_err() {
                // SAFETY: `boxed` came from `Box::into_raw` just above and
                // was never published.
                drop(unsafe { Box::from_raw(boxed) });
            }
        }
        self.plugin_as::<T>()
    }

    /// The installed plugin, if any.
    #[inline]
    pub(crate) fn plugin(&self) -> Option<&Arc<dyn WorkerPlugin>> {
        // Acquire pairs with the Release of the install.
        let p = self.plugin.load(Ordering::Acquire);
        // SAFETY: a non-null pointer is a box published once by
        // `install_plugin` and freed only when the runtime drops.
        unsafe { p.as_ref() }
    }

    /// The installed plugin as a `T`, if it is one.
    pub(crate) fn plugin_as<T: WorkerPlugin>(&self) -> Option<&T> {
        let plugin: &dyn Any = &**self.plugin()?;
        plugin.downcast_ref::<T>()
    }
}

/// A cell reads back as the types it was made from, and as no other (run
/// under miri too: the typed reads are the kernel's casts).
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    struct Meta(u32);
    static META: Meta = Meta(7);

    #[test]
    fn a_cell_reads_back_as_its_own_types_only() {
        let mut cell = StacklessCell::new(Box::new(41_u64), &META);
        assert_eq!(cell.meta::<Meta>().map(|m| m.0), Some(7));
        assert!(cell.meta::<u64>().is_none(), "the description is not a u64");
        assert!(CellRef { cell: &mut cell }.value::<u32>().is_none(), "the value is not a u32");
        if let Some(value) = (CellRef { cell: &mut cell }).value::<u64>() {
            *value += 1;
        }
        assert!(cell.meta::<Meta>().is_some());
        assert_eq!(cell.into_value::<u64>().map(|v| *v), Some(42));
    }

    #[test]
    fn a_cell_of_another_type_is_not_taken_for_one() {
        let cell = StacklessCell::new(Box::new(alloc::string::String::from("cell")), &META);
        assert!(cell.into_value::<u64>().is_none());
    }
}
