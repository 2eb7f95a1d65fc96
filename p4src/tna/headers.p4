/* netcoll on TNA: what only Tofino needs around the shared headers and coll_meta_t.
 *
 * - netcoll_port_md_h: per-port data the control plane writes into the ingress parser's port
 *   metadata table (phase 0, keyed by the ingress dev port), so the parser hands ingress the
 *   port's logical number and one-hot child bit without a table or a variable shift.
 * - netcoll_bridge_h: what egress needs from ingress (TNA has no metadata shared across the
 *   traffic manager): the decision's replica rules and, for a steered packet, its origin.
 * - netcoll_steer_h: on the wire only between a pipe's egress and the state pipe's
 *   recirculation port: the logical ingress port a steered packet arrived by, and whether it
 *   is a reduction's release pass (tna/state.p4, BarrierState).
 * - netcoll_resubmit_h: resubmit data of the second pass that finishes a root's barrier
 *   completion (Tofino 1 carries 8 bytes, Tofino 2 16).
 * docs/porting-to-tofino.md explains each mechanism.
 */
#ifndef NETCOLL_TNA_HEADERS_P4
#define NETCOLL_TNA_HEADERS_P4

#include "../common/constants.p4"
#include "../common/headers.p4"

/* netcoll_port_md_h.flags */
const bit<8> PORT_FLAG_STATE_PIPE = 0x01; /* the port is in the pipe that holds the registers */
const bit<8> PORT_FLAG_STEER_ENTRY = 0x02; /* packets arriving here start with netcoll_steer_h */

/* netcoll_bridge_h.kind */
const bit<8> BRIDGE_FORWARD = 1; /* unicast or reply: no replica rule applies */
const bit<8> BRIDGE_REPLICA = 2; /* a copy made by the multicast engine */
const bit<8> BRIDGE_STEER = 3; /* to the state pipe: egress prepends netcoll_steer_h */

/* netcoll_bridge_h.flags: the shared replica rules of common/egress.p4 */
const bit<8> BRIDGE_FLAG_FILTER_CHILDREN = 0x01;
const bit<8> BRIDGE_FLAG_PRUNE_INGRESS = 0x02;

/* netcoll_bridge_h.flags of BRIDGE_STEER, copied into netcoll_steer_h.flags */
const bit<8> STEER_FLAG_RELEASE = 0x04; /* a reduction's release pass (tna/state.p4) */

/* netcoll_resubmit_h.flags */
const bit<8> RESUBMIT_FLAG_STEERED = 0x01; /* the first pass's packet started with a steer header */

/* ig_dprsr_md.resubmit_type of the barrier commit pass */
const bit<3> RESUBMIT_TYPE_COMMIT = 1;

/* Every multicast node this program uses carries this RID, and every multicast packet asks for
 * it (ig_tm_md.rid), so level-2 pruning (which applies only when the two are equal) is on. */
const bit<16> NETCOLL_REPLICA_RID = 1;
/* A level-2 exclusion id with no $pre.prune entry: nothing is pruned. Logical port p uses p. */
const bit<9> L2_XID_NONE = 0;

/* Exactly PORT_METADATA_SIZE on Tofino 1 (64 bits); Tofino 2's 192 are skipped after it. */
header netcoll_port_md_h {
    bit<8> logical_port; /* the port number of SwitchState and the shared logic; 0: none */
    bit<8> flags;
    bit<16> steer_port; /* dev port that reaches the state pipe (its recirculation port) */
    port_bitmap_t port_bit; /* bit (logical_port - 1), 0 when logical_port is out of range */
}

header netcoll_bridge_h {
    bit<8> kind;
    bit<8> flags;
    port_num_t in_port;
    port_bitmap_t in_port_bit;
    port_bitmap_t mcast_children;
    bit<16> generation; /* BRIDGE_STEER with STEER_FLAG_RELEASE: the slot pass's generation */
}

header netcoll_steer_h {
    port_num_t in_port;
    port_bitmap_t in_port_bit;
    bit<8> flags; /* STEER_FLAG_* */
    bit<16> generation; /* the release pass's: the configuration it was decided under */
}

header netcoll_resubmit_h {
    bit<8> flags;
    bit<8> in_port; /* logical ports are below NETCOLL_MAX_PORTS <= 32 */
    bit<16> commit_generation;
    port_bitmap_t in_port_bit;
#if __TARGET_TOFINO__ != 1
    bit<64> tofino2_pad; /* Tofino 2 resubmit data is 16 bytes */
#endif
}

/* One header struct for both gresses: ingress emits bridge + net, egress steer + net. */
struct tna_headers_t {
    netcoll_bridge_h bridge;
    netcoll_steer_h steer;
    /* parsed on the commit pass, filled to request one; never emitted into the packet (the
     * deparsers emit bridge, steer and net by name). Here, not in the ingress metadata:
     * p4c-barefoot 1.2.5 initialises a metadata header with an invalid-header assignment it
     * then cannot lower ("Unexpected operation when eliminating struct copying") */
    netcoll_resubmit_h resubmit;
    /* phase 0, on a pass that had it (not a resubmitted one). Here for the same reason. */
    netcoll_port_md_h port_md;
    headers_t net;
}

struct tna_ingress_meta_t {
    coll_meta_t coll;
    /* the op and source as the packet arrived: a release pass starts from them (the slot
     * pass's decision has rewritten both, and Classify checks a host's source) */
    bit<8> arrived_op;
    node_id_t arrived_src;
}

struct tna_egress_meta_t {
    coll_meta_t coll; /* only the replica-rule fields, rebuilt from the bridge header */
    port_num_t egress_port; /* logical */
    port_bitmap_t egress_port_bit;
    port_bitmap_t egress_port_in_children; /* egress_port_bit & the bridged child bitmap */
}

#endif /* NETCOLL_TNA_HEADERS_P4 */
