/* netcoll: wire headers and the architecture-neutral metadata.
 * Field order and widths are controller/wire.py's HEADER_FIELDS and MP_FIELDS; docs/protocol.md
 * draws them.
 */
#ifndef NETCOLL_HEADERS_P4
#define NETCOLL_HEADERS_P4

#include "types.p4"
#include "lanes.p4"

header ethernet_h {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16> ether_type;
}

header ipv4_h {
    bit<4> version;
    bit<4> ihl;
    bit<8> diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3> flags;
    bit<13> frag_offset;
    bit<8> ttl;
    bit<8> protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

/* The collective header: 40 bytes after Ethernet. */
header coll_h {
    bit<8> version;
    bit<8> op;
    comm_id_t comm_id;
    epoch_t epoch;
    bit<8> tree;
    bit<8> flags;
    bit<32> seq;
    node_id_t src_node;
    node_id_t dst_node;
    node_id_t root_node;
    bit<16> tag;
    bit<32> seg_idx;
    bit<32> seg_count;
    bit<32> msg_len;
    bit<16> payload_len;
    bit<16> stamp;   /* host to host (a send time and its echo): switches pass it on */
    bit<32> payload_crc;
}

/* Mini packet body: 20 bytes after the collective header when op is MP or MP_REPLY. */
header mp_h {
    bit<8> kind;
    bit<8> status;
    bit<16> slot;
    bit<32> generation;
    port_num_t parent_port;
    epoch_t epoch;
    port_bitmap_t children;
    bit<32> aux;
}

/* Lanes of a REDUCE or RESULT: its whole payload (payload_len = 4 * NETCOLL_AGG_LANES),
 * big-endian 32-bit values l0, l1, ... (controller/wire.py: pack_lanes). */
#define NETCOLL_AGG_LANE_FIELD(i) bit<32> l##i;
header agg_h {
    NETCOLL_FOR_EACH_LANE(NETCOLL_AGG_LANE_FIELD)
}

struct headers_t {
    ethernet_h ethernet;
    ipv4_h ipv4;
    coll_h coll;
    mp_h mp;
    agg_h agg;
}

/* Everything the shared logic reads and decides. Ports are 16-bit numbers here whatever the
 * architecture's own port width; the shim converts at the edges. */
struct coll_meta_t {
    /* filled by the architecture shim before the shared logic runs */
    port_num_t in_port;
    port_bitmap_t in_port_bit; /* one-hot child bit of in_port, 0 when out of range */
    port_bitmap_t in_ports_below; /* in_port_bit - 1: the child bits of the lower ports */
    bit<32> frame_len; /* bytes on the wire; 0 when the architecture cannot tell */
    bit<1> parse_error;

    /* facts about the ingress port and this switch (table port_info, switch_identity) */
    bit<8> port_role;
    node_id_t port_node; /* the host expected behind a host port */
    node_id_t my_node;

    /* classification and the decision */
    bit<8> class;
    node_id_t route_key;
    bit<8> out_kind;
    port_num_t out_port; /* where a unicast leaves; a reply leaves by in_port, set here too */
    bit<16> mcast_grp;
    port_bitmap_t mcast_children; /* replicas outside this bitmap are filtered in egress */
    bit<1> filter_children;
    bit<1> prune_ingress; /* replicas never leave by their ingress port */
    bit<8> drop_reason;
    bit<8> counter_column;

    /* broadcast */
    bit<8> tree_source;
    port_num_t tree_parent;
    bit<16> tree_slot;
    port_bitmap_t tree_children;
    bit<8> replication_mode;
    bit<16> replication_group;

    /* barrier (slot = communicator id) */
    port_bitmap_t bar_child_mask;
    port_num_t bar_parent; /* 0: this switch is the root of the barrier tree */
    /* bit of bar_parent where the shim can compute it (variable shift), else 0: an ARRIVE
     * that completes the cell is then not echoed to the child that completed it */
    port_bitmap_t bar_parent_bit;
    bit<16> bar_generation;
    epoch_t bar_released;
    port_bitmap_t bar_arrived;
    bit<8> bar_verdict;
    bit<1> bar_complete;
    /* operands of the barrier's tests (see in_child) */
    epoch_t bar_ahead; /* the packet's epoch - bar_released (RFC 1982 distance; operand) */

    /* reduction (common/reduce.p4): the chunk's slot and key, what the slot said, the verdict */
    bit<32> agg_slot;
    bit<32> agg_tag;
    bit<32> agg_owner;
    bit<8> agg_relation;
    port_bitmap_t agg_previous; /* agg_arrived before this packet (0 for a fresh slot) */
    /* agg_previous & AGG_RESULT_KNOWN, computed in an action (operand): a test of bit 31
     * itself slices agg_previous there, and with it every port bitmap it meets in an action,
     * which Tofino 1's PHV allocation could not place (docs/porting-to-tofino.md) */
    bit<32> agg_result_known;
    bit<8> agg_verdict;
    bit<8> agg_lane_mode;
    bit<32> agg_chunks_left; /* seg_count - seg_idx, 1 for an instance's last chunk (operand) */
    bit<32> agg_completed_before; /* at the root: the tag it completed last (agg_completed) */

    /* switch-merged ACKs (common/ackmerge.p4): the slot's entry, and the cell after the ACK */
    bit<1> ack_found;
    bit<1> ack_admitted; /* the lookup's checks passed: AckMergeDecide runs */
    /* state_op asks for BarrierState (a barrier, a reduction, a barrier MP): tested on its own
     * (NETCOLL_CLASSIFY_TABLE), it is known as soon as Classify's table sets it */
    bit<1> barrier_state_asked;
    bit<16> ack_slot;
    port_num_t ack_parent;
    port_bitmap_t ack_child_mask;
    bit<8> ack_generation;
    port_bitmap_t ack_previous; /* the cell's child bitmap before this ACK */
    port_bitmap_t ack_cell_after; /* ack_previous | in_port_bit (operand) */
    bit<32> ack_cum;            /* the cell's lowest cum with this ACK: what goes up */
    /* operands of AckMergeLookup's and ack_sends_up's tests (see in_child) */
    port_bitmap_t ack_children_below; /* ack_child_mask & in_ports_below */
    bit<32> ack_seq_ceiling;          /* max(seq, seg_count) */

    /* Bitmap operands of the decisions' tests, computed in actions before the tests: a Tofino
     * gateway compares a field with a constant or with one other field; it cannot mask one
     * field with another (docs/porting-to-tofino.md). In actions, not in an apply block:
     * there p4c's LocalCopyPropagation folds the assignment back into the condition that
     * reads it, even for a metadata field; after an action the value is unknown to it.
     * Tofino's PHV has few 32-bit containers, so the two serve the barrier, the reduction and
     * the merged ACKs (no packet is two), each in two steps:
     *   in_port_match   the tree's child mask & in_port_bit (is the port a child?), then in a
     *                   reduction agg_previous & in_port_bit (was this child counted?);
     *   missing_after   the children still missing with this packet (a reduction, a
     *                   barrier repair). */
    port_bitmap_t in_port_match;
    port_bitmap_t missing_after;

    /* state access requested from the architecture shim, and the mini packet outcome */
    bit<8> state_op;
    /* the row the state control indexes (comm_id, the MP's slot or the tree binding's), set
     * where state_op is: on Tofino an index chosen later costs a stage before the register */
    bit<16> state_slot;
    bit<8> mp_status;
    bit<32> mp_ahead; /* the offered generation - the stored one (mp_generation_status) */

    /* Architecture-private: written by a shim for its own state controls, never read by the
     * shared logic (v1model leaves them 0). On Tofino: the registers live in another pipe
     * (steer there); the resubmitted pass that finishes a root's barrier completion, with the
     * configuration generation it was counted under; the cell tag, an input of the cell's
     * register program (docs/porting-to-tofino.md). */
    bit<1> arch_state_elsewhere;
    bit<1> arch_commit_pass;
    bit<1> arch_commit_stands; /* the commit pass advanced released (TNA BarrierState) */
    bit<1> arch_resubmit; /* this pass is decided, but a resubmitted one finishes the state */
    /* a reduction's release pass: the instance's last RESULT, recirculated to advance the
     * released epoch (arch_release_next asks for it, arch_release_pass is it) */
    bit<1> arch_release_next;
    bit<1> arch_release_pass;
    bit<16> arch_commit_generation;
    bit<32> arch_cell_tag;
    /* Classify's comparisons as XORs in port_info's and switch_identity's actions, for its
     * table (NETCOLL_CLASSIFY_TABLE): src_node, the IPv4 source's low half, dst_node */
    node_id_t arch_src_diff;
    node_id_t arch_ipv4_src_diff;
    node_id_t arch_dst_diff;
    /* AggState: the slot's owner ^ the packet's (0 if equal); the reduction's tag - the
     * stored one; what agg_arrived records (the child bit, or a RESULT's mask and flag) */
    bit<32> arch_agg_owner_change;
    bit<32> arch_agg_tag_ahead;
    bit<32> arch_agg_arrival;
    bit<32> arch_seg_idx;       /* seg_idx copied through the hash unit (BarrierState) */
}

#endif /* NETCOLL_HEADERS_P4 */
