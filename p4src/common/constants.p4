/* netcoll: compile-time sizes and protocol constants shared by every architecture.
 *
 * Sizes are -D overridable. The control plane never hard-codes them: it reads the sizes of the
 * tables, registers and counters back from P4Info (controller/p4info.py), so a program built
 * with other values is driven correctly, and running out of slots is a control-plane error.
 * Protocol values mirror controller/wire.py; tests/unit/test_wire.py keeps them in step.
 */
#ifndef NETCOLL_CONSTANTS_P4
#define NETCOLL_CONSTANTS_P4

#ifndef NETCOLL_MAX_PORTS
#define NETCOLL_MAX_PORTS 32 /* ports 1..31 usable; child bitmaps are 32 bits wide */
#endif
#ifndef NETCOLL_COMM_SLOTS
#define NETCOLL_COMM_SLOTS 256 /* communicator ids 0..COMM_SLOTS-1 own a barrier slot */
#endif
#ifndef NETCOLL_BARRIER_WINDOW
#define NETCOLL_BARRIER_WINDOW 4 /* open barrier epochs per communicator; a power of two */
#endif
#ifndef NETCOLL_TREE_SLOTS
#define NETCOLL_TREE_SLOTS 1024 /* broadcast trees whose membership mini packets write */
#endif
#ifndef NETCOLL_NODE_ROUTES
#define NETCOLL_NODE_ROUTES 8192 /* unicast routes: hosts, switches, management node */
#endif
#ifndef NETCOLL_BCAST_TREES
#define NETCOLL_BCAST_TREES 4096 /* (communicator, root, tree) bindings */
#endif
#ifndef NETCOLL_AGG_WINDOW
/* aggregation slots per communicator; a power of two. Hosts keep half of them in flight, so
 * 16 puts a 1 KiB reduction's 8 chunks on the wire at once: their losses are repaired side by
 * side, not one window after another */
#define NETCOLL_AGG_WINDOW 16
#endif
#ifndef NETCOLL_AGG_LANES
#define NETCOLL_AGG_LANES 32 /* 32-bit lanes per REDUCE/RESULT packet: 8, 16, 32 or 64 */
#endif

#ifndef NETCOLL_ACK_SLOTS
#define NETCOLL_ACK_SLOTS 4096 /* ACK-merge slots: one per (communicator, root, tree) merged here */
#endif
#ifndef NETCOLL_ACK_WINDOW
#define NETCOLL_ACK_WINDOW 8 /* open ACK checkpoints per ACK-merge slot; a power of two */
#endif

#if (NETCOLL_BARRIER_WINDOW & (NETCOLL_BARRIER_WINDOW - 1)) != 0
#error "NETCOLL_BARRIER_WINDOW must be a power of two"
#endif
#if (NETCOLL_ACK_WINDOW & (NETCOLL_ACK_WINDOW - 1)) != 0 || NETCOLL_ACK_WINDOW > 256
#error "NETCOLL_ACK_WINDOW must be a power of two, at most 256 (the tag keeps 8 checkpoint bits)"
#endif
#if NETCOLL_MAX_PORTS > 32
#error "child bitmaps are 32 bits: NETCOLL_MAX_PORTS must be at most 32"
#endif
#if (NETCOLL_AGG_WINDOW & (NETCOLL_AGG_WINDOW - 1)) != 0
#error "NETCOLL_AGG_WINDOW must be a power of two"
#endif
#if NETCOLL_AGG_LANES != 8 && NETCOLL_AGG_LANES != 16 && NETCOLL_AGG_LANES != 32 \
    && NETCOLL_AGG_LANES != 64
#error "NETCOLL_AGG_LANES must be 8, 16, 32 or 64"
#endif

#define NETCOLL_BARRIER_CELLS (NETCOLL_COMM_SLOTS * NETCOLL_BARRIER_WINDOW)
#define NETCOLL_COUNTER_COLUMNS 16
#define NETCOLL_PORT_COUNTERS (NETCOLL_MAX_PORTS * NETCOLL_COUNTER_COLUMNS)
#define NETCOLL_DROP_REASONS 32
#define NETCOLL_AGG_SLOTS (NETCOLL_COMM_SLOTS * NETCOLL_AGG_WINDOW)
#define NETCOLL_AGG_LANE_CELLS (NETCOLL_AGG_SLOTS * NETCOLL_AGG_LANES)
#define NETCOLL_ACK_CELLS (NETCOLL_ACK_SLOTS * NETCOLL_ACK_WINDOW)

const bit<16> ETHERTYPE_COLL = 0x88B5; /* IEEE Local Experimental EtherType 1 */
const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8> COLL_VERSION = 1;
const bit<16> IPV4_HOST_PREFIX = 0x0A00; /* hosts are 10.0.0.0/16, low 16 bits = node id */

const bit<16> COLL_HEADER_BYTES = 40;
const bit<16> MP_BODY_BYTES = 20;
const bit<16> ETHERNET_BYTES = 14;
const bit<16> AGG_PAYLOAD_BYTES = 4 * NETCOLL_AGG_LANES; /* REDUCE/RESULT payload: the lanes */

/* Operations (controller/wire.py: Op) */
const bit<8> OP_MCAST = 1;
const bit<8> OP_UNICAST = 2;
const bit<8> OP_ACK = 3;
const bit<8> OP_NACK = 4;
const bit<8> OP_ARRIVE = 5;
const bit<8> OP_RELEASE = 6;
const bit<8> OP_MP = 7;
const bit<8> OP_MP_REPLY = 8;
const bit<8> OP_PING = 9;
const bit<8> OP_PONG = 10;
const bit<8> OP_CTRL = 11;
const bit<8> OP_REDUCE = 12;
const bit<8> OP_RESULT = 13;
const bit<8> OP_MAX = 13;

/* Header flags (controller/wire.py: Flag) the switch looks at */
const bit<8> FLAG_RETRANSMIT = 0x01;
const bit<8> FLAG_REPLY_NOW = 0x04; /* on ARRIVE: echo it, and let a resend ask (barrier.p4) */
const bit<8> FLAG_MERGE = 0x20; /* an ACK the switches merge up the tree (common/ackmerge.p4) */

/* Reduction operations, carried in coll_h.tree of REDUCE/RESULT (controller/wire.py: AggOp) */
const bit<8> AGG_SUM = 1; /* wrapping 32-bit sum */
const bit<8> AGG_MIN = 2; /* signed 32-bit */
const bit<8> AGG_MAX = 3; /* signed 32-bit */
const bit<8> AGG_AND = 4;
const bit<8> AGG_OR = 5;
const bit<8> AGG_XOR = 6;
const bit<8> AGG_OP_MAX = 6;

/* Counter columns besides the ops themselves */
const bit<8> COLUMN_OTHER = 0;
const bit<8> COLUMN_IPV4 = 14;
const bit<8> COLUMN_BAD_OP = 15;

/* Port roles, set per port by the control plane. An unconfigured port is a host port, so an
 * unknown port can never inject mini packets. */
const bit<8> ROLE_HOST = 0;
const bit<8> ROLE_SWITCH = 1;
const bit<8> ROLE_MGMT = 2;

/* Mini packet kinds and status (controller/wire.py: MpKind, MpStatus) */
const bit<8> MP_WRITE_TREE = 1;
const bit<8> MP_WRITE_BARRIER = 2;
const bit<8> MP_READ_TREE = 3;
const bit<8> MP_READ_BARRIER = 4;
const bit<8> MP_STATUS_OK = 1;
const bit<8> MP_STATUS_DUPLICATE = 2;
const bit<8> MP_STATUS_STALE = 3;
const bit<8> MP_STATUS_BAD_SLOT = 4;
const bit<8> MP_STATUS_BAD_KIND = 5;

/* Drop reasons: index of the drop counter (controller/wire.py: DropReason) */
const bit<8> DROP_NONE = 0;
const bit<8> DROP_MALFORMED = 1;
const bit<8> DROP_BAD_OP = 2;
const bit<8> DROP_NO_ROUTE = 3;
const bit<8> DROP_UNKNOWN_TREE = 4;
const bit<8> DROP_RPF = 5;
const bit<8> DROP_COMM_RANGE = 6;
const bit<8> DROP_BARRIER_UNCONFIGURED = 7;
const bit<8> DROP_NOT_CHILD = 8;
const bit<8> DROP_NOT_PARENT = 9;
const bit<8> DROP_OUT_OF_WINDOW = 10;
const bit<8> DROP_STALE_RELEASE = 11;
const bit<8> DROP_MP_FROM_HOST = 12;
const bit<8> DROP_MP_STALE = 13;
const bit<8> DROP_MP_BAD_SLOT = 14;
const bit<8> DROP_MP_BAD_KIND = 15;
const bit<8> DROP_SRC_SPOOF = 16;
const bit<8> DROP_PORT_RANGE = 17;
const bit<8> DROP_NON_COLLECTIVE = 18;
const bit<8> DROP_PRUNED = 19;
const bit<8> DROP_FILTERED = 20;
const bit<8> DROP_EMPTY_TREE = 21;
const bit<8> DROP_ABSORBED = 22;
const bit<8> DROP_MP_DUPLICATE = 23;
const bit<8> DROP_AGG_BAD_OP = 24;
const bit<8> DROP_AGG_CHUNK_RANGE = 25;
const bit<8> DROP_AGG_STALE = 26;
const bit<8> DROP_AGG_DUPLICATE = 27;
const bit<8> DROP_ACK_UNCONFIGURED = 28;
const bit<8> DROP_ACK_NOT_CHILD = 29;
const bit<8> DROP_ACK_RANGE = 30;

/* What the shared ingress logic asks the architecture to do with the packet */
const bit<8> OUT_DROP = 0;
const bit<8> OUT_UNICAST = 1; /* to meta.out_port */
const bit<8> OUT_MCAST = 2; /* to multicast group meta.mcast_grp */
const bit<8> OUT_REPLY = 3; /* back out of the ingress port */

/* Packet classes after classification */
const bit<8> CLASS_NONE = 0;
const bit<8> CLASS_ROUTE = 1; /* unicast by destination node id */
const bit<8> CLASS_MCAST = 2;
const bit<8> CLASS_BARRIER = 3;
const bit<8> CLASS_LOCAL = 4; /* mini packet or ping addressed to this switch */
const bit<8> CLASS_AGG = 5; /* REDUCE or RESULT */
const bit<8> CLASS_ACK_MERGE = 6; /* ACK with FLAG_MERGE */

/* Where a broadcast tree's replication comes from */
const bit<8> TREE_SOURCE_NONE = 0;
const bit<8> TREE_SOURCE_STATIC = 1; /* P4Runtime: parent port and group in the table entry */
const bit<8> TREE_SOURCE_SLOT = 2; /* mini packets: parent port and child bitmap in registers */

/* How replication from a child bitmap is realised (table mp_replication) */
const bit<8> REPLICATION_SUBSET_GROUPS = 1; /* one pre-installed group per port subset */
const bit<8> REPLICATION_ALL_PORTS = 2; /* one all-ports group, egress filters on the bitmap */

/* Barrier verdicts (common/barrier.p4) */
const bit<8> BARRIER_COUNT = 1; /* record the arrival */
const bit<8> BARRIER_ANSWER_RELEASE = 2; /* epoch already released: answer the sender */
const bit<8> BARRIER_ADVANCE = 3; /* RELEASE from the parent for a newer epoch */
/* ARRIVE(e) with REPLY_NOW from the parent: it released e - 1 and misses this subtree at e
 * (set by shims that implement it: v1model/state.p4) */
const bit<8> BARRIER_ASKED = 4;

/* Which piece of switch state a packet touches this pass (one state control per pass) */
const bit<8> STATE_NONE = 0;
const bit<8> STATE_TREE_READ = 1; /* MCAST bound to a membership slot */
const bit<8> STATE_TREE_MP_WRITE = 2;
const bit<8> STATE_TREE_MP_READ = 3;
const bit<8> STATE_BARRIER_EVENT = 4; /* ARRIVE or RELEASE */
const bit<8> STATE_BARRIER_MP_WRITE = 5;
const bit<8> STATE_BARRIER_MP_READ = 6;
/* Set by a state control that cannot finish the packet in this pass (on Tofino: its registers
 * live in another pipe, or a root's completion must advance the released epoch in a second
 * pass). NetcollIngress then takes no decision and the shim carries the packet to that pass;
 * v1model never sets it. */
const bit<8> STATE_NEXT_PASS = 7;
/* REDUCE or RESULT: BarrierState reads the communicator's tree, then AggState its slot */
const bit<8> STATE_AGG_EVENT = 8;
/* ACK with FLAG_MERGE: AckState merges it into its ACK-merge cell */
const bit<8> STATE_ACK_EVENT = 9;

/* How an aggregation slot's stored key relates to a packet's (common/reduce.p4) */
const bit<8> AGG_KEY_SAME = 1; /* same chunk of the same instance, same configuration */
const bit<8> AGG_KEY_FRESH = 2; /* newer chunk, other configuration, or a never-used slot */
const bit<8> AGG_KEY_STALE = 3; /* an older chunk: the slot has moved on */

/* agg_arrived: the child bitmap, and in bit 31 (never a child bit: ports < 32) the flag "the
 * final result is stored here" */
const bit<32> AGG_RESULT_KNOWN = 0x80000000;

/* Reduction verdicts (common/reduce.p4) */
const bit<8> AGG_ABSORB = 1; /* recorded; other children still missing */
const bit<8> AGG_SEND_UP = 2; /* partial aggregate (or its resend) to the parent */
const bit<8> AGG_DISTRIBUTE = 3; /* RESULT to every child: root completion, or from the parent */
const bit<8> AGG_ANSWER = 4; /* result known: RESULT back to the sender only */
const bit<8> AGG_ASK = 5; /* the REDUCE down to the children not recorded yet (a repair) */

/* What a reduction does with the slot's lanes */
const bit<8> AGG_LANES_NONE = 0;
const bit<8> AGG_LANES_SET = 1; /* lanes := packet (first contribution, or a RESULT) */
const bit<8> AGG_LANES_COMBINE = 2; /* lanes := op(lanes, packet) */
const bit<8> AGG_LANES_READ = 3; /* packet := lanes */

#endif /* NETCOLL_CONSTANTS_P4 */
