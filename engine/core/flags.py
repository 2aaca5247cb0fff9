"""The state of an in-memory message in the queue core (engine/core/lanes.py), and the lanes'
shape: plain constants, so that every module (and the compiled core, which types them in its
.pxd) reads the same values."""

LANE_MASK = 0x0F  # the lane index, in the low four bits of a slot's state
UNCOMMITTED = 0x10  # put inside a unit of work not yet committed: invisible
GOTTEN = 0x20  # got inside a unit of work not yet committed: invisible, restored on backout
LOCKED = 0x40  # locked by a browse handle: invisible to other handles, never swept
BATCHED = 0x80  # assigned to a transmission batch: not gettable, never swept
REMOVED = 0x100  # taken off its lane for good: the slot is free (or freed when the sweep ends)
HIDDEN = UNCOMMITTED | GOTTEN  # not counted in Lane.ready
AVAILABLE_BELOW = 0x10  # a slot is available to a get iff its state is below this

N_LANES = 10  # priorities 0..9
SENTINELS = 2 * N_LANES  # slots 0..19: the front and rear list heads of each lane
