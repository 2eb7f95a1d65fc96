/* netcoll on v1model: the registers and the code that reads and writes them.
 *
 * Every register update is a read-modify-write inside one action, in ingress (simple_switch
 * runs one ingress thread); the decisions are the shared functions of common/.
 */
#ifndef NETCOLL_V1MODEL_STATE_P4
#define NETCOLL_V1MODEL_STATE_P4

#include <core.p4>
#include <v1model.p4>
#include "../common/constants.p4"
#include "../common/headers.p4"
#include "../common/barrier.p4"
#include "../common/membership.p4"
#include "../common/reduce.p4"
#include "../common/ackmerge.p4"

/* Child bit of a port: bit (port - 1); ports outside 1..NETCOLL_MAX_PORTS-1 have none. */
port_bitmap_t port_bit(in port_num_t port) {
    return port >= 1 && port < NETCOLL_MAX_PORTS ? 32w1 << (bit<8>) (port - 1) : 32w0;
}

control TreeState(inout headers_t hdr, inout coll_meta_t meta) {
    register<port_num_t>(NETCOLL_TREE_SLOTS) tree_parent;
    register<port_bitmap_t>(NETCOLL_TREE_SLOTS) tree_children;
    register<bit<32>>(NETCOLL_TREE_SLOTS) tree_generation;

    action read_slot() {
        tree_parent.read(meta.tree_parent, (bit<32>) meta.tree_slot);
        tree_children.read(meta.tree_children, (bit<32>) meta.tree_slot);
    }

    action write_slot() {
        bit<32> slot = (bit<32>) hdr.mp.slot;
        bit<32> stored_generation;
        port_num_t stored_parent;
        port_bitmap_t stored_children;
        tree_generation.read(stored_generation, slot);
        tree_parent.read(stored_parent, slot);
        tree_children.read(stored_children, slot);
        bit<8> status = mp_generation_status(hdr.mp.generation - stored_generation);
        bool accept = status == MP_STATUS_OK;
        tree_generation.write(slot, accept ? hdr.mp.generation : stored_generation);
        tree_parent.write(slot, accept ? hdr.mp.parent_port : stored_parent);
        tree_children.write(slot, accept ? hdr.mp.children : stored_children);
        meta.mp_status = status;
    }

    action read_slot_into_reply() {
        bit<32> slot = (bit<32>) hdr.mp.slot;
        tree_parent.read(hdr.mp.parent_port, slot);
        tree_children.read(hdr.mp.children, slot);
        tree_generation.read(hdr.mp.generation, slot);
        meta.mp_status = MP_STATUS_OK;
    }

    apply {
        if (meta.state_op == STATE_TREE_READ) {
            read_slot();
        } else if (meta.state_op == STATE_TREE_MP_WRITE) {
            write_slot();
        } else {
            read_slot_into_reply();
        }
    }
}

/* Lane i of slot s is cell s * NETCOLL_AGG_LANES + i of agg_lanes. */
#define V1_LANE_INDEX(i) (meta.agg_slot * NETCOLL_AGG_LANES + i)
#define V1_LANE_SET(i) agg_lanes.write(V1_LANE_INDEX(i), hdr.agg.l##i);
#define V1_LANE_COMBINE(i) \
    agg_lanes.read(lane, V1_LANE_INDEX(i)); \
    hdr.agg.l##i = agg_combine(hdr.coll.tree, lane, hdr.agg.l##i); \
    agg_lanes.write(V1_LANE_INDEX(i), hdr.agg.l##i);
#define V1_LANE_READ(i) agg_lanes.read(hdr.agg.l##i, V1_LANE_INDEX(i));

/* Aggregation slots (common/reduce.p4). BarrierState applies it after reading the tree into
 * meta.bar_*; the same register order as the TNA shim: key, arrived, lanes. */
control AggState(inout headers_t hdr, inout coll_meta_t meta) {
    AggAdmissionWithAsks() admission;
    AggClassify() classify;
    register<bit<64>>(NETCOLL_AGG_SLOTS) agg_key; /* tag in [63:32], owner in [31:0] */
    register<port_bitmap_t>(NETCOLL_AGG_SLOTS) agg_arrived;
    register<bit<32>>(NETCOLL_AGG_LANE_CELLS) agg_lanes;
    /* the tag of the chunk the root completed last, per comm slot (common/reduce.p4) */
    register<bit<32>>(NETCOLL_COMM_SLOTS) agg_completed;

    /* Take the slot for this chunk unless it holds a newer one, or the packet is an ask. */
    action claim_key() {
        bit<64> key;
        agg_key.read(key, meta.agg_slot);
        meta.agg_relation = agg_key_relation(key[63:32], key[31:0], meta.agg_tag, meta.agg_owner);
        agg_key.write(meta.agg_slot, (meta.agg_relation == AGG_KEY_FRESH
            && !agg_is_ask(hdr.coll.op, meta.in_port_bit, meta.bar_child_mask))
            ? meta.agg_tag ++ meta.agg_owner : key);
    }

    action record_arrival() {
        port_bitmap_t stored;
        agg_arrived.read(stored, meta.agg_slot);
        meta.agg_previous = agg_arrivals_before(meta.agg_relation, stored);
        meta.missing_after = meta.bar_child_mask ^ (meta.agg_previous | meta.in_port_bit);
        meta.in_port_match = meta.agg_previous & meta.in_port_bit; /* admission is past */
        meta.agg_result_known = meta.agg_previous & AGG_RESULT_KNOWN;
        agg_arrived.write(meta.agg_slot,
            agg_is_ask(hdr.coll.op, meta.in_port_bit, meta.bar_child_mask) ? stored
            : agg_arrivals_after(hdr.coll.op, meta.agg_relation, stored, meta.in_port_bit,
                                 meta.bar_child_mask));
    }

    action set_lanes() {
        NETCOLL_FOR_EACH_LANE(V1_LANE_SET)
    }

    action combine_lanes() {
        bit<32> lane;
        NETCOLL_FOR_EACH_LANE(V1_LANE_COMBINE)
    }

    action read_lanes() {
        NETCOLL_FOR_EACH_LANE(V1_LANE_READ)
    }

    /* comm_id was range-checked by AggHeaderCheck */
    action record_completion() {
        agg_completed.read(meta.agg_completed_before, (bit<32>) hdr.coll.comm_id);
        agg_completed.write((bit<32>) hdr.coll.comm_id, meta.agg_tag);
    }

    apply {
        admission.apply(hdr, meta);
        if (meta.drop_reason == DROP_NONE
                && !agg_epoch_in_window(hdr.coll.op, meta.bar_ahead)) {
            meta.drop_reason = DROP_OUT_OF_WINDOW; /* BarrierState read the released epoch */
        }
        if (meta.drop_reason != DROP_NONE) {
            return;
        }
        meta.agg_slot = agg_slot_index(hdr.coll.comm_id, hdr.coll.seg_idx);
        meta.agg_tag = agg_tag(hdr.coll.epoch, hdr.coll.seg_idx);
        meta.agg_owner = agg_owner(meta.bar_generation);
        meta.agg_chunks_left = hdr.coll.seg_count - hdr.coll.seg_idx;
        claim_key();
        if (meta.agg_relation == AGG_KEY_STALE) {
            meta.drop_reason = DROP_AGG_STALE; /* every host has that chunk's result */
            return;
        }
        record_arrival();
        classify.apply(hdr, meta);
        agg_repair(hdr.coll.op, hdr.coll.flags, meta.agg_previous, meta.in_port_bit,
                   meta.bar_child_mask, meta.agg_verdict, meta.agg_lane_mode, meta.drop_reason);
        if (meta.agg_lane_mode == AGG_LANES_SET) {
            set_lanes();
        } else if (meta.agg_lane_mode == AGG_LANES_COMBINE) {
            combine_lanes();
        } else if (meta.agg_lane_mode == AGG_LANES_READ) {
            read_lanes();
        }
        if (meta.agg_verdict == AGG_DISTRIBUTE && hdr.coll.op == OP_REDUCE) {
            record_completion(); /* only the root distributes a REDUCE */
        }
    }
}

control BarrierState(inout headers_t hdr, inout coll_meta_t meta) {
    AggState() agg_state;
    BarrierClassify() classify;
    register<port_bitmap_t>(NETCOLL_COMM_SLOTS) barrier_child_mask;
    register<port_num_t>(NETCOLL_COMM_SLOTS) barrier_parent;
    register<bit<32>>(NETCOLL_COMM_SLOTS) barrier_generation;
    register<epoch_t>(NETCOLL_COMM_SLOTS) barrier_released;
    register<barrier_cell_t>(NETCOLL_BARRIER_CELLS) barrier_cells;

    action read_config() {
        bit<32> slot = (bit<32>) hdr.coll.comm_id;
        bit<32> generation;
        barrier_child_mask.read(meta.bar_child_mask, slot);
        barrier_parent.read(meta.bar_parent, slot);
        barrier_generation.read(generation, slot);
        barrier_released.read(meta.bar_released, slot);
        meta.bar_generation = generation[15:0];
        meta.bar_parent_bit = port_bit(meta.bar_parent);
        meta.in_port_match = meta.bar_child_mask & meta.in_port_bit;
        meta.bar_ahead = hdr.coll.epoch - meta.bar_released;
    }

    action count_arrival() {
        bit<32> cell_index = barrier_cell_index(hdr.coll.comm_id, hdr.coll.epoch);
        bit<32> tag = barrier_cell_tag(hdr.coll.epoch, meta.bar_generation);
        barrier_cell_t cell;
        barrier_cells.read(cell, cell_index);
        cell = barrier_cell_merge(cell, tag, meta.in_port_bit);
        barrier_cells.write(cell_index, cell);
        meta.bar_arrived = cell[31:0];
        meta.bar_complete = cell[31:0] == meta.bar_child_mask ? 1w1 : 1w0;
    }

    action advance_released() {
        barrier_released.write((bit<32>) hdr.coll.comm_id, hdr.coll.epoch);
    }

    /* The parent asks about epoch e (BarrierDecide): what this slot recorded for e, and the
     * RELEASE of e - 1 the parent's ask implies. */
    action read_asked_arrivals() {
        barrier_cell_t cell;
        barrier_cells.read(cell, barrier_cell_index(hdr.coll.comm_id, hdr.coll.epoch));
        meta.bar_arrived = barrier_cell_arrivals(
            cell, barrier_cell_tag(hdr.coll.epoch, meta.bar_generation));
        meta.bar_complete = meta.bar_arrived == meta.bar_child_mask ? 1w1 : 1w0;
    }

    action advance_released_before_asked() {
        barrier_released.write((bit<32>) hdr.coll.comm_id, hdr.coll.epoch - 1);
    }

    /* A new configuration also sets the released epoch; cells of older generations no longer
     * match their tag, so no cell needs clearing. */
    action write_config() {
        bit<32> slot = (bit<32>) hdr.mp.slot;
        bit<32> stored_generation;
        port_bitmap_t stored_mask;
        port_num_t stored_parent;
        epoch_t stored_released;
        barrier_generation.read(stored_generation, slot);
        barrier_child_mask.read(stored_mask, slot);
        barrier_parent.read(stored_parent, slot);
        barrier_released.read(stored_released, slot);
        bit<8> status = mp_generation_status(hdr.mp.generation - stored_generation);
        bool accept = status == MP_STATUS_OK;
        barrier_generation.write(slot, accept ? hdr.mp.generation : stored_generation);
        barrier_child_mask.write(slot, accept ? hdr.mp.children : stored_mask);
        barrier_parent.write(slot, accept ? hdr.mp.parent_port : stored_parent);
        barrier_released.write(slot, accept ? hdr.mp.epoch : stored_released);
        meta.mp_status = status;
    }

    action read_config_into_reply() {
        bit<32> slot = (bit<32>) hdr.mp.slot;
        bit<32> generation;
        epoch_t released;
        barrier_cell_t open_cell;
        barrier_child_mask.read(hdr.mp.children, slot);
        barrier_parent.read(hdr.mp.parent_port, slot);
        barrier_generation.read(generation, slot);
        barrier_released.read(released, slot);
        barrier_cells.read(open_cell, barrier_cell_index(hdr.mp.slot, released + 1));
        hdr.mp.generation = generation;
        hdr.mp.epoch = released;
        hdr.mp.aux = barrier_cell_arrivals(open_cell,
                                           barrier_cell_tag(released + 1, generation[15:0]));
        meta.mp_status = MP_STATUS_OK;
    }

    apply {
        if (meta.state_op == STATE_BARRIER_EVENT) {
            read_config();
            classify.apply(hdr, meta);
            if (meta.drop_reason == DROP_NOT_CHILD && meta.bar_parent != 0
                    && meta.in_port == meta.bar_parent && hdr.coll.op == OP_ARRIVE
                    && (hdr.coll.flags & FLAG_REPLY_NOW) != 0) {
                meta.drop_reason = DROP_NONE;
                meta.bar_verdict = BARRIER_ASKED;
                read_asked_arrivals();
                if (barrier_missed_previous_release(meta.bar_ahead)) {
                    advance_released_before_asked();
                }
            } else if (meta.bar_verdict == BARRIER_COUNT) {
                count_arrival();
                if (meta.bar_complete == 1 && meta.bar_parent == 0) {
                    advance_released();
                }
            } else if (meta.bar_verdict == BARRIER_ADVANCE) {
                advance_released();
            }
        } else if (meta.state_op == STATE_AGG_EVENT) {
            read_config(); /* the reduction's tree */
            agg_state.apply(hdr, meta);
            if (agg_releases_epoch(meta.agg_verdict, meta.agg_chunks_left)
                    && epoch_distance_after(meta.bar_ahead)) {
                advance_released();
            }
        } else if (meta.state_op == STATE_BARRIER_MP_WRITE) {
            write_config();
        } else {
            read_config_into_reply();
        }
    }
}

/* ACK-merge cells (common/ackmerge.p4): the same packed {tag, bitmap} as a barrier cell, and
 * beside each the packed {tag, lowest cum} its children claimed (ack_cum_merge). The index is
 * in range: the slot was checked against NETCOLL_ACK_SLOTS (AckMergeLookup), the checkpoint is
 * masked to the window. */
control AckState(inout headers_t hdr, inout coll_meta_t meta) {
    register<barrier_cell_t>(NETCOLL_ACK_CELLS) ack_cells;
    register<bit<64>>(NETCOLL_ACK_CELLS) ack_cums;

    action merge_ack() {
        bit<32> cell_index = ack_cell_index(meta.ack_slot, hdr.coll.seg_idx);
        bit<32> tag = ack_cell_tag(hdr.coll.epoch, meta.ack_generation, hdr.coll.seg_idx);
        barrier_cell_t cell;
        ack_cells.read(cell, cell_index);
        meta.ack_previous = barrier_cell_arrivals(cell, tag);
        ack_cells.write(cell_index, barrier_cell_merge(cell, tag, meta.in_port_bit));
        bit<64> cum_cell;
        ack_cums.read(cum_cell, cell_index);
        meta.ack_cum = ack_cum_merge(cum_cell[63:32], cum_cell[31:0], tag, hdr.coll.seq);
        ack_cums.write(cell_index, tag ++ meta.ack_cum);
    }

    apply {
        merge_ack();
    }
}

#endif /* NETCOLL_V1MODEL_STATE_P4 */
