/* netcoll: acknowledgements of a multicast merged up its tree (ACK with FLAG_MERGE).
 *
 * Receivers in switch-merged mode ACK only at checkpoints: cum = k * K segments (K the hosts'
 * ack_every) for each checkpoint k they cross, and the final cum = seg_count; seg_idx carries
 * the checkpoint ordinal k = ceil(cum / K), seq carries cum. Each switch of the (comm, root,
 * tree) tree has a table entry (ack_merge, from the same trees as bcast_tree) naming its
 * ACK-merge slot, the parent port (towards the root; the root host's port at the root's
 * switch), the child mask and a configuration generation. A slot holds NETCOLL_ACK_WINDOW cells
 * {tag = epoch ++ generation ++ k[7:0], child bitmap}, the cell of checkpoint k being k mod
 * NETCOLL_ACK_WINDOW, updated exactly like a barrier cell (common/barrier.p4): a cell left by
 * another epoch, checkpoint or generation is empty. When the bitmap becomes equal to the child
 * mask the ACK goes up the parent port as ONE ACK. Receivers repeat a checkpoint when the root
 * retransmits (it has not heard the merged ACK: lost, or a switch restarted and zeroed its
 * cells); at a complete cell only the repeats of the *leader* child (the lowest child port) go
 * up again, so each repeat round brings one ACK to the root, not one per receiver, and a
 * restarted switch is rebuilt by its children's repeats. ACKs are cumulative, so a checkpoint
 * that never completes here blocks nothing.
 * The cum that goes up is the cell's, not the completing child's: each cell also keeps the
 * lowest cum its children claimed under its tag (ack_cum_merge), and the ACK that goes up
 * carries that. A child that withholds its checkpoint and then completes the cell claiming
 * cum = seg_count can only lower what goes up, never raise it past what every other child
 * acknowledged (the root also checks cum against the checkpoint and what it sent).
 * The architecture shim owns the cells (AckState); docs/protocol.md has the state machine.
 */
#ifndef NETCOLL_ACKMERGE_P4
#define NETCOLL_ACKMERGE_P4

#include "constants.p4"
#include "headers.p4"

bit<32> ack_cell_index(in bit<16> slot, in bit<32> checkpoint) {
    return (bit<32>) slot * NETCOLL_ACK_WINDOW + (checkpoint & (NETCOLL_ACK_WINDOW - 1));
}

/* A cell belongs to one checkpoint of one multicast (epoch) under one configuration. Checkpoints
 * 256 apart share a tag: the root's window keeps live checkpoints far closer than that. */
bit<32> ack_cell_tag(in epoch_t epoch, in bit<8> generation, in bit<32> checkpoint) {
    return epoch ++ generation ++ checkpoint[7:0];
}

control AckMergeLookup(in headers_t hdr, inout coll_meta_t meta) {
    /* Besides the entry, the operands the tests below and AckMergeDecide compare with
     * constants (a Tofino gateway cannot mask, subtract or order two fields). */
    action merge_acks(bit<16> slot, port_num_t parent_port, port_bitmap_t child_mask,
                      bit<8> generation) {
        meta.ack_found = 1;
        meta.state_op = STATE_ACK_EVENT; /* AckState runs only if the checks below pass */
        meta.ack_slot = slot;
        meta.ack_parent = parent_port;
        meta.ack_child_mask = child_mask;
        meta.ack_generation = generation;
        meta.in_port_match = child_mask & meta.in_port_bit;
        /* the children on ports below this one: none when it is the leader (lowest child) */
        meta.ack_children_below = child_mask & meta.in_ports_below;
        /* max (Tofino's ALU has it): an order of two fields, tested as an equality */
        meta.ack_seq_ceiling = (hdr.coll.seq > hdr.coll.seg_count) ? hdr.coll.seq
                                                                   : hdr.coll.seg_count;
    }

    action no_merge() {
        meta.ack_found = 0;
    }

    table ack_merge {
        key = {
            hdr.coll.comm_id : exact @name("comm_id");
            hdr.coll.root_node : exact @name("root_node");
            hdr.coll.tree : exact @name("tree");
        }
        actions = { merge_acks; no_merge; }
        default_action = no_merge();
        size = NETCOLL_ACK_SLOTS;
    }

    /* Each test sets the outcome itself, nested: a flag set by one test and read by the next
     * costs Tofino a stage each (a table writes it, the next stage's gateway reads it). */
    apply {
        ack_merge.apply();
        /* no entry, or one naming a slot the program does not have: never index with it */
        if (meta.ack_found == 0) {
            meta.drop_reason = DROP_ACK_UNCONFIGURED;
        } else if (meta.ack_slot >= NETCOLL_ACK_SLOTS) {
            meta.drop_reason = DROP_ACK_UNCONFIGURED;
        } else if (meta.ack_parent == 0) {
            meta.drop_reason = DROP_ACK_UNCONFIGURED;
        } else if (meta.ack_child_mask == 0) {
            meta.drop_reason = DROP_ACK_UNCONFIGURED;
        } else if (meta.in_port_match == 0) {
            meta.drop_reason = DROP_ACK_NOT_CHILD;
        /* the checkpoint fields: 1 <= k < 2^16, 1 <= cum <= seg_count (seq_ceiling is
         * max(seq, seg_count), from the action: cum <= seg_count as an equality) */
        } else if (hdr.coll.seg_idx == 0 || hdr.coll.seg_idx > 0xFFFF) {
            meta.drop_reason = DROP_ACK_RANGE;
        } else if (hdr.coll.seq == 0) {
            meta.drop_reason = DROP_ACK_RANGE;
        } else if (meta.ack_seq_ceiling != hdr.coll.seg_count) {
            meta.drop_reason = DROP_ACK_RANGE;
        } else {
            /* AckMergeDecide runs on this alone: on Tofino, a test of drop_reason there
             * waited for every other pass's writes of it */
            meta.ack_admitted = 1;
        }
    }
}

/* The cell's cum with this ACK: the lowest any child claimed for the cell's tag (a cell left by
 * another tag starts again from this ACK's). */
bit<32> ack_cum_merge(in bit<32> stored_tag, in bit<32> stored_cum, in bit<32> tag,
                      in bit<32> cum) {
    return (stored_tag == tag && stored_cum < cum) ? stored_cum : cum;
}

/* After AckState: one ACK up the parent port when the cell completes, or the leader repeats.
 * Applied only to an ACK its lookup admitted (ack_admitted).
 *
 * ack_sends_up (controller/switch_rules.py): the ACK goes up when it completes the cell, or
 * repeats the leader child's checkpoint at a complete cell (the leader: the lowest child
 * port, no children below it). cell_after = previous | in_port_bit, computed in an action;
 * the cell is complete with this ACK when it equals the child mask (an equality of two
 * fields, which a Tofino gateway makes). The tests are the if statements themselves: a
 * function's bool result, copied out through a temporary, cost Tofino a stage. */
control AckMergeDecide(inout headers_t hdr, inout coll_meta_t meta) {
    /* the operand, in an action (why: common/headers.p4, operands), in a field of its own:
     * in missing_after, which the barrier writes too, Tofino placed it after the barrier's
     * write */
    action compute_cell_with_this_ack() {
        meta.ack_cell_after = meta.ack_previous | meta.in_port_bit;
    }
    /* complete here, or the leader's repeat at a complete cell: one ACK upward */
    action send_merged_ack_up() {
        hdr.coll.src_node = meta.my_node; /* the root accepts merged ACKs from its switch */
        hdr.coll.seq = meta.ack_cum;      /* the cell's cum, never the child's claim */
        meta.out_kind = OUT_UNICAST;
        meta.out_port = meta.ack_parent;
    }
    /* recorded: waits for the other children, or a repeat only the leader passes on */
    action absorb() {
        meta.drop_reason = DROP_ABSORBED;
    }

    apply {
        compute_cell_with_this_ack();
        if (meta.ack_cell_after != meta.ack_child_mask) {
            absorb();
        } else if (meta.ack_previous != meta.ack_child_mask) {
            send_merged_ack_up(); /* this ACK completes the cell */
        } else if (meta.ack_children_below == 0) {
            send_merged_ack_up(); /* the leader's repeat */
        } else {
            absorb();
        }
    }
}

#endif /* NETCOLL_ACKMERGE_P4 */
