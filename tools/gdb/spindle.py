# gdb extension for spindle fibers (docs/observability.md, "gdb").
#
#   source tools/gdb/spindle.py
#   info spindle-fibers      every fiber in the registry: id, state, name
#   spindle-fiber ID         show fiber ID's stack: bt, frame, up, print
#                            (a running one's: select its thread)
#   spindle-fiber            back to the thread's own stack
#
# Works on a live process and on a core file, with either context backend
# (asm or ucontext); showing a parked fiber's stack needs x86-64. Nothing in the inferior is written: a selected
# fiber is shown through an unwinder that, for the innermost frame of the
# thread it was selected on, reports the fiber's saved registers as its
# caller's. gdb cannot write a core file's registers, and setting $rsp/$rip
# in a live process would corrupt it if the user then continued; the
# unwinder does neither. The thread's own innermost frame stays frame #0
# (a frame filter hides it from bt); frame #1 is the fiber's.

import gdb
import gdb.unwinder

# glibc's x86-64 REG_* indices into uc_mcontext.gregs.
_UC_GREGS = {"r12": 4, "r13": 5, "r14": 6, "r15": 7, "rbp": 10, "rbx": 11,
             "rsp": 15, "rip": 16}
# The asm backend's saved frame (ctx_x86_64.S), in 8-byte slots from the
# saved stack pointer: mxcsr|x87cw, r15, r14, r13, r12, rbx, rbp, return.
_ASM_SLOTS = {"r15": 1, "r14": 2, "r13": 3, "r12": 4, "rbx": 5, "rbp": 6,
              "rip": 7}
_ASM_FRAME_BYTES = 64
# Fields another build may have; shown only if the fiber type has them.
_OPTIONAL_FIELDS = ("wait_kind",)
_MAX_FIBERS = 10000000  # a bound on the walk, should the list be corrupt


def _fiber_type():
    try:
        return gdb.lookup_type("struct sp_fiber")
    except gdb.error:
        raise gdb.GdbError("no struct sp_fiber in the loaded symbols: "
                           "is libspindle (with debug info) loaded?")


def _field_offset(t, name):
    for f in t.fields():
        if f.name == name:
            return f.bitpos // 8
    raise gdb.GdbError("struct sp_fiber has no field %s" % name)


def _has_field(t, name):
    return any(f.name == name for f in t.fields())


def fibers():
    """The fibers of the registry, in creation order (gdb.Value pointers)."""
    t = _fiber_type()
    off = _field_offset(t, "reg_link")
    try:
        link = gdb.parse_and_eval("sp__fiber_registry")["head"]
    except gdb.error:
        raise gdb.GdbError("sp__fiber_registry not found: is libspindle "
                           "loaded (and new enough to have it)?")
    char_p = gdb.lookup_type("char").pointer()
    n = 0
    while int(link) != 0 and n < _MAX_FIBERS:
        f = (link.cast(char_p) - off).cast(t.pointer())
        if int(f["id"]) == 0:
            # Ids are never 0: the memory is not there, as in a gcore
            # file that could not read the fiber stacks' slab.
            raise gdb.GdbError("fiber object at %#x reads as zeros: its "
                               "memory is missing (from a gcore file? see "
                               "docs/observability.md)" % int(f))
        yield f
        link = link["next"]
        n += 1


def state(f):
    """f's state as sp_fiber_state_t names it, without the SP_FIBER_."""
    v = int(f["state"])
    try:
        t = gdb.lookup_type("sp_fiber_state_t").strip_typedefs()
    except gdb.error:
        return str(v)
    for e in t.fields():
        if e.enumval == v:
            return e.name.replace("SP_FIBER_", "", 1)
    return str(v)


def _find_fiber(fid):
    for f in fibers():
        if int(f["id"]) == fid:
            return f
    raise gdb.GdbError("no fiber with id %d in the registry" % fid)


def _saved_regs(f):
    """The registers a parked fiber resumes with, as its caller frame of the
    switch: {name: int}. Raises GdbError if it has none to show."""
    why = {"READY": "it has not run yet",
           "RUNNING": "its registers are a thread's",
           "DONE": "it has no stack to show"}.get(state(f))
    if why:
        raise gdb.GdbError("fiber %d is %s: %s" % (int(f["id"]), state(f),
                                                   why))
    arch = gdb.selected_frame().architecture().name()
    if "x86-64" not in arch:
        raise gdb.GdbError("spindle-fiber supports x86-64 only (this is %s)"
                           % arch)
    ctx = f["ctx"]
    u64 = gdb.lookup_type("unsigned long long")
    if _has_field(ctx.type.strip_typedefs(), "uc"):
        gregs = ctx["uc"]["uc_mcontext"]["gregs"]
        return {r: int(gregs[i].cast(u64)) for r, i in _UC_GREGS.items()}
    sp = int(ctx["sp"].cast(u64))
    slots = gdb.Value(sp).cast(u64.pointer())
    regs = {r: int(slots[i]) for r, i in _ASM_SLOTS.items()}
    regs["rsp"] = sp + _ASM_FRAME_BYTES
    return regs


def running_thread(f):
    """The gdb thread whose current fiber is f (read from each thread's
    spindle state, the thread-local sp__thread_self), or None."""
    here = gdb.selected_thread()
    try:
        for th in gdb.selected_inferior().threads():
            th.switch()
            try:
                t = gdb.parse_and_eval("sp__thread_self")
                if int(t) != 0 and int(t["current"]) == int(f):
                    return th
            except gdb.error:
                continue  # no spindle state on this thread
    finally:
        here.switch()
    return None


class _Selection:
    """The fiber being shown, and the thread frame it hangs under."""

    def __init__(self):
        self.clear()

    def clear(self):
        self.fid = None
        self.regs = None
        self.thread_sp = self.thread_pc = None

    def active(self):
        return self.regs is not None

    def under(self, sp, pc):
        """Whether a thread's innermost frame is the one the fiber hangs
        under (once the process runs on, it no longer is)."""
        return self.active() and sp == self.thread_sp and pc == self.thread_pc


_sel = _Selection()


class _FrameId:
    """A frame id as create_unwind_info takes it (gdb.unwinder.FrameId
    only exists from gdb 14); gdb 13 wants gdb.Value attributes."""

    def __init__(self, sp, pc):
        self.sp = sp
        self.pc = pc


class FiberUnwinder(gdb.unwinder.Unwinder):
    """For the thread's innermost frame, while a fiber is selected: its
    caller is the fiber's frame parked in the switch."""

    def __init__(self):
        super().__init__("spindle-fiber")

    def __call__(self, pending_frame):
        if not _sel.active():
            return None
        if hasattr(pending_frame, "level") and pending_frame.level() != 0:
            return None
        sp = int(pending_frame.read_register("rsp"))
        pc = int(pending_frame.read_register("rip"))
        if not _sel.under(sp, pc):
            return None
        # The frame's id gets the fiber's stack pointer, not the thread's:
        # gdb stops a backtrace whose caller frames lie inner (below) the
        # callee's, and the fiber stack may be anywhere.
        rsp = pending_frame.read_register("rsp")
        info = pending_frame.create_unwind_info(_FrameId(
            gdb.Value(_sel.regs["rsp"]).cast(rsp.type),
            pending_frame.read_register("rip")))
        for r, v in _sel.regs.items():
            info.add_saved_register(r, gdb.Value(v).cast(
                pending_frame.read_register(r).type))
        return info


class FiberFrameFilter:
    """Hides the thread's own frame #0 from bt while a fiber is shown."""

    def __init__(self):
        self.name = "spindle-fiber"
        self.priority = 100
        self.enabled = True
        gdb.frame_filters[self.name] = self

    def filter(self, frames):
        if not _sel.active():
            return frames
        return (d for d in frames if not self._hidden(d.inferior_frame()))

    @staticmethod
    def _hidden(frame):
        return frame.level() == 0 and _sel.under(
            int(frame.read_register("rsp")), int(frame.pc()))


class InfoSpindleFibers(gdb.Command):
    """List the fibers of spindle's registry: id, state, last worker, name
    and the function it runs. A '*' marks the one selected with
    spindle-fiber."""

    def __init__(self):
        super().__init__("info spindle-fibers", gdb.COMMAND_STATUS)

    def invoke(self, arg, from_tty):
        t = _fiber_type()
        extra = [n for n in _OPTIONAL_FIELDS if _has_field(t, n)]
        head = "  %-8s %-10s %-6s %-20s" % ("ID", "STATE", "WORKER", "NAME")
        head += "".join(" %-12s" % n.upper() for n in extra)
        gdb.write(head + " FUNCTION\n")
        count = 0
        for f in fibers():
            count += 1
            fid = int(f["id"])
            mark = "*" if fid == _sel.fid else " "
            name = f["name"].string(length=32).split("\0", 1)[0]
            line = "%s %-8d %-10s %-6d %-20s" % (
                mark, fid, state(f), int(f["last_worker"]),
                name or "-")
            for n in extra:
                line += " %-12s" % _field_text(f, n)
            gdb.write(line + " " + _entry(f) + "\n")
        gdb.write("%d fiber%s\n" % (count, "" if count == 1 else "s"))


def _wait_kind_names():
    """sp__wait_kind_t's names by value ("fd_read", "sleep"...), or {}."""
    try:
        t = gdb.lookup_type("sp__wait_kind_t").strip_typedefs()
    except gdb.error:
        return {}
    return {int(fl.enumval): fl.name.replace("SP__WAIT_", "").lower()
            for fl in t.fields()}


def _field_text(f, n):
    """An optional field as text: the wait kind by name (with its fd) for a
    parked fiber, "-" for one that waits on nothing."""
    if n != "wait_kind":
        return str(f[n])
    if state(f) != "SUSPENDED":
        return "-"
    v = int(f[n])
    text = _wait_kind_names().get(v, str(v))
    if text.startswith("fd_") and _has_field(f.type, "wait_fd"):
        text += ":%d" % int(f["wait_fd"])
    return text if v else "-"


def _entry(f):
    """The fiber's function, by name: for an sp_go() task, the task's."""
    t = f.dereference().type
    fn = int(f["go_fn"]) if _has_field(t, "go_fn") else 0
    fn = fn or int(f["fn"])
    block = gdb.current_progspace().block_for_pc(fn) if fn else None
    if block is not None and block.function is not None:
        return block.function.print_name
    return "%#x" % fn


class SpindleFiber(gdb.Command):
    """spindle-fiber ID: show fiber ID's stack (bt, frame, up, print work
    on it); frame #1 is its innermost frame. For a running fiber, select
    the thread it runs on. spindle-fiber: back to the thread's own stack.
    ID is the fiber id of `info spindle-fibers`."""

    def __init__(self):
        super().__init__("spindle-fiber", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        arg = arg.strip()
        if not arg:
            was = _sel.fid
            _sel.clear()
            gdb.invalidate_cached_frames()
            if was is not None:
                gdb.write("back to the thread's own stack\n")
            gdb.execute("frame 0", from_tty)
            return
        try:
            fid = int(gdb.parse_and_eval(arg))
        except gdb.error:
            raise gdb.GdbError("usage: spindle-fiber [ID]")
        f = _find_fiber(fid)
        if state(f) == "RUNNING":
            self._to_thread(f, fid, from_tty)
            return
        regs = _saved_regs(f)
        _sel.clear()
        gdb.invalidate_cached_frames()
        frame0 = gdb.newest_frame()
        _sel.thread_sp = int(frame0.read_register("rsp"))
        _sel.thread_pc = int(frame0.read_register("rip"))
        _sel.regs = regs
        _sel.fid = fid
        gdb.invalidate_cached_frames()
        gdb.write("fiber %d (frame #0 is the thread's own; bt shows the "
                  "fiber from #1)\n" % fid)
        gdb.execute("frame 1", from_tty)

    @staticmethod
    def _to_thread(f, fid, from_tty):
        """A running fiber's stack is its thread's: select that thread."""
        th = running_thread(f)
        if th is None:
            raise gdb.GdbError("fiber %d is RUNNING, on no thread found: "
                               "see info threads" % fid)
        _sel.clear()
        gdb.invalidate_cached_frames()
        gdb.write("fiber %d is running on thread %d\n" % (fid, th.num))
        gdb.execute("thread %d" % th.num, from_tty)


def _register():
    # Sourced twice (by hand and by auto-load), the second copy replaces
    # the first.
    gdb.unwinder.register_unwinder(None, FiberUnwinder(), replace=True)
    FiberFrameFilter()
    InfoSpindleFibers()
    SpindleFiber()


_register()
