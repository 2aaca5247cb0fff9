"""The sizes the crash and damage harnesses default to, which their commands' helps show
(cli/harness.py): here, in a module that imports nothing, so that building ``sweepq``'s
parser does not load the harnesses. Each harness imports its own from here, under the names
it has always had (``driver.QUICK_KILLS``, ``damage.COMBOS``, ...)."""

CRASH_KILLS = 1000  # sweepq crashtest: kill points, each a worker run ended by SIGKILL
CRASH_QUICK_KILLS = 50  # its --quick form, what CI runs
CRASH_INTERVAL = 0.05  # the crash worker's sweep interval, seconds
CORRUPTIONS = ("sst-bitflip", "sst-truncate", "wal-bitflip", "wal-truncate")  # crashtest --corrupt
CHANNEL_KILLS = 1000  # sweepq crashtest-channel
CHANNEL_QUICK_KILLS = 50
SERVER_QUICK_KILLS = 8  # sweepq crashtest-server --quick

# sweepq damagetest: every (state, file kind, damage) in the order trials take them, then one
# plain kill (bench/damage.py's docstring says what each is); --quick is one round of them.
FILE_KINDS = ("MANIFEST", "CURRENT", "OPTIONS", "log", "sst", "sweepq", "other")
DAMAGES = ("cut", "zero", "flip", "delete")
STATES = ("closed", "killed", "open")
COMBOS = [(s, k, d) for k in FILE_KINDS for d in DAMAGES for s in STATES] + [("plain", "none", "none")]
DAMAGE_QUICK_TRIALS = len(COMBOS)
DAMAGE_TRIALS = 1000
