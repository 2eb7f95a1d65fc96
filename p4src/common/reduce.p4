/* netcoll: reduction (REDUCE up the barrier tree, RESULT down it) in aggregation slots.
 *
 * A reduction uses the barrier tree of its communicator (child mask, parent port, generation
 * from the barrier slot that mini packets write): nothing else is configured. Each chunk of
 * NETCOLL_AGG_LANES 32-bit lanes lands in slot comm_id * NETCOLL_AGG_WINDOW + (seg_idx mod
 * NETCOLL_AGG_WINDOW), whose state is
 *   key      {tag = epoch ++ seg_idx[15:0], owner = 1 ++ barrier generation[15:0]}; owner 0:
 *            never used (so a first packet always starts the slot);
 *   arrived  the children that contributed, bit 31 = AGG_RESULT_KNOWN (the final result is here);
 *   lanes    the partial aggregate, or the result.
 * The architecture shim owns the registers (AggState, applied by BarrierState between reading
 * the tree and the released epoch, agg_releases_epoch) and calls the functions below, in the
 * order key, arrived, lanes, so every architecture takes the same decisions;
 * docs/protocol.md has the state machine.
 *
 * The root's RESULT names, in seq, the chunk the root completed before it (its tag; register
 * agg_completed, one per comm slot, read and replaced after the verdict: meta.agg_completed_
 * before), and keeps that name down the tree; a switch answering from its slot sends seq 0.
 * A host that gets the RESULT of a chunk whose predecessor it lacks lost that one below the
 * root, alone or with its subtree, and asks its switch for it at once, where a chunk not
 * completed (every host lacks it) waits for the resend order
 * (host_agents/transport/result_order.py).
 */
#ifndef NETCOLL_REDUCE_P4
#define NETCOLL_REDUCE_P4

#include "constants.p4"
#include "headers.p4"
#include "barrier.p4"

/* Header checks before any register is indexed: comm_id names a slot row, seg_idx fits the
 * 16-bit tag, tree names an operation. An admitted packet asks for its state access here (one
 * test per if, each setting the outcome: see AckMergeLookup). */
control AggHeaderCheck(in headers_t hdr, inout coll_meta_t meta) {
    apply {
#ifdef NETCOLL_NO_REDUCTION
        /* a profile without in-network reduction (Tofino 1's: docs/porting-to-tofino.md):
         * this switch runs no operation, and the hosts reduce */
        meta.drop_reason = DROP_AGG_BAD_OP;
#else
        if (hdr.coll.comm_id >= NETCOLL_COMM_SLOTS) {
            meta.drop_reason = DROP_COMM_RANGE;
        } else if (hdr.coll.seg_idx > 0xFFFF) {
            meta.drop_reason = DROP_AGG_CHUNK_RANGE;
        } else if (hdr.coll.tree == 0 || hdr.coll.tree > AGG_OP_MAX) {
            meta.drop_reason = DROP_AGG_BAD_OP;
        } else {
            meta.state_op = STATE_AGG_EVENT;
            meta.state_slot = hdr.coll.comm_id;
            meta.barrier_state_asked = 1;
        }
#endif
    }
}

bit<32> agg_slot_index(in comm_id_t comm, in bit<32> chunk) {
    return (bit<32>) comm * NETCOLL_AGG_WINDOW + (chunk & (NETCOLL_AGG_WINDOW - 1));
}

bit<32> agg_tag(in epoch_t epoch, in bit<32> chunk) {
    return epoch ++ chunk[15:0];
}

/* The configuration generation a slot was started under, never 0 once started. */
bit<32> agg_owner(in bit<16> generation) {
    return 16w1 ++ generation;
}

/* RFC 1982 on 32 bits: is tag a after tag b? (epoch first, then chunk) */
bool agg_tag_after(in bit<32> a, in bit<32> b) {
    bit<32> distance = a - b;
    return distance != 0 && distance < 0x80000000;
}

/* How a slot's stored key relates to the packet's: the whole key decision, usable as the
 * condition of a register program (Tofino's RegisterAction) and by the verdict alike. */
bit<8> agg_key_relation(in bit<32> stored_tag, in bit<32> stored_owner, in bit<32> tag,
                        in bit<32> owner) {
    return (stored_owner == owner && stored_tag == tag) ? AGG_KEY_SAME
        : ((stored_owner != owner || agg_tag_after(tag, stored_tag)) ? AGG_KEY_FRESH
                                                                    : AGG_KEY_STALE);
}

/* agg_arrived after a packet that is not stale: a RESULT makes the slot final (every child
 * counted, result known); a REDUCE adds its child's bit to the slot's set, empty if fresh. */
port_bitmap_t agg_arrivals_after(in bit<8> op, in bit<8> relation, in port_bitmap_t stored,
                                 in port_bitmap_t child, in port_bitmap_t child_mask) {
    return (op == OP_RESULT) ? child_mask | AGG_RESULT_KNOWN
        : ((relation == AGG_KEY_FRESH) ? 32w0 : stored) | child;
}

/* agg_arrived as the verdict sees it: what the slot held for this chunk before the packet. */
port_bitmap_t agg_arrivals_before(in bit<8> relation, in port_bitmap_t stored) {
    return (relation == AGG_KEY_FRESH) ? 32w0 : stored;
}

/* A REDUCE opens an instance only within the barrier window after the released epoch, as an
 * ARRIVE does: one far ahead would take its slot as FRESH and every honest, older contribution
 * would then be dropped as stale. An epoch not after released is a late contribution (answered
 * from the slot, or stale); a RESULT comes from the parent, which checked it. ahead is
 * epoch - released (meta.bar_ahead): out of the window when it is after released
 * (epoch_distance_after) by more than the window (beyond_window). */
bool agg_epoch_in_window(in bit<8> op, in epoch_t ahead) {
    /* one expression: inlined into the test that calls it, not into a flag set before it */
    return op != OP_REDUCE || !beyond_window(ahead) || ahead >= 0x8000;
}

/* Before the slot: may this port send this op on the communicator's tree? Sets
 * meta.drop_reason. meta.in_port_match is child mask & in_port_bit, computed in an action.
 * A control, not a function returning the reason: see BarrierClassify. */
control AggAdmission(in headers_t hdr, inout coll_meta_t meta) {
    apply {
        meta.drop_reason = DROP_NONE;
        if (meta.bar_child_mask == 0) {
            meta.drop_reason = DROP_BARRIER_UNCONFIGURED;
        } else if (hdr.coll.op == OP_REDUCE) {
            if (meta.in_port_match == 0) {
                meta.drop_reason = DROP_NOT_CHILD;
            }
        } else if (meta.bar_parent == 0 || meta.in_port != meta.bar_parent) {
            /* only the parent sends a RESULT; the root accepts none */
            meta.drop_reason = DROP_NOT_PARENT;
        }
    }
}

/* AggAdmission, and a REDUCE from the parent port admitted: the parent asks for this
 * subtree's contribution (agg_repair). */
control AggAdmissionWithAsks(in headers_t hdr, inout coll_meta_t meta) {
    AggAdmission() admission;
    apply {
        admission.apply(hdr, meta);
        if (meta.drop_reason == DROP_NOT_CHILD && meta.bar_parent != 0
                && meta.in_port == meta.bar_parent) {
            meta.drop_reason = DROP_NONE;
        }
    }
}

/* A REDUCE from the parent (admitted by AggAdmissionWithAsks) asks for this subtree's part:
 * it records nothing and takes no slot (a slot it claimed would add the next contribution to
 * the lanes of the chunk before). */
bool agg_is_ask(in bit<8> op, in port_bitmap_t in_port_bit, in port_bitmap_t child_mask) {
    return op == OP_REDUCE && (child_mask & in_port_bit) == 0;
}

/* What to do with a REDUCE or RESULT that is not stale, from agg_arrived before it
 * (meta.agg_previous). Sets meta.agg_verdict (one of AGG_*), meta.agg_lane_mode (what happens
 * to the slot's lanes) and, for a drop, meta.drop_reason. The caller computes, in actions,
 * meta.in_port_match = previous & in_port_bit (this child counted already),
 * meta.missing_after = child_mask ^ (previous | in_port_bit) (the children still missing with
 * this packet; read only for a child not counted yet) and meta.agg_result_known = previous &
 * AGG_RESULT_KNOWN (tested whole: a test of bit 31 alone slices every port bitmap there): a
 * Tofino gateway cannot combine two fields, and reads at most 4 bytes of fields, so one test
 * per if. A control: see BarrierClassify. */
/* AggClassify's contribution that is not an answer: counted already (a complete slot's partial
 * goes up again, else a duplicate), or recorded (absorbed, or complete: distributed by the
 * root, sent up by any other switch). */
control AggContribution(in headers_t hdr, inout coll_meta_t meta) {
    apply {
        if (meta.in_port_match != 0) {
            if (meta.agg_previous == meta.bar_child_mask) {
                /* complete, no result yet: the partial may have been lost */
                meta.agg_verdict = AGG_SEND_UP;
                meta.agg_lane_mode = AGG_LANES_READ;
            } else {
                meta.drop_reason = DROP_AGG_DUPLICATE; /* counted once already */
            }
        } else {
            if (meta.agg_relation == AGG_KEY_FRESH) {
                meta.agg_lane_mode = AGG_LANES_SET;
            } else {
                meta.agg_lane_mode = AGG_LANES_COMBINE;
            }
            if (meta.missing_after != 0) {
                meta.agg_verdict = AGG_ABSORB;
            } else if (meta.bar_parent == 0) {
                /* the root completed: the aggregate is the result */
                meta.agg_verdict = AGG_DISTRIBUTE;
            } else {
                meta.agg_verdict = AGG_SEND_UP;
            }
        }
    }
}

control AggClassify(in headers_t hdr, inout coll_meta_t meta) {
    /* applied on both sides of the root's test: an "answer" flag tested after it would cost
     * Tofino a stage */
    AggContribution() contribution_at_root;
    AggContribution() contribution;

    apply {
        meta.agg_verdict = 0;
        meta.agg_lane_mode = AGG_LANES_NONE;
        meta.drop_reason = DROP_NONE;
        if (hdr.coll.op == OP_RESULT) {
            meta.agg_verdict = AGG_DISTRIBUTE;
            meta.agg_lane_mode = AGG_LANES_SET;
        } else if (meta.agg_result_known != 0) {
            /* late or repeated contribution: the result is here */
            meta.agg_verdict = AGG_ANSWER;
            meta.agg_lane_mode = AGG_LANES_READ;
        } else if (meta.bar_parent == 0) {
            if (meta.agg_previous == meta.bar_child_mask) {
                /* the same at the root, where complete means the result is known */
                meta.agg_verdict = AGG_ANSWER;
                meta.agg_lane_mode = AGG_LANES_READ;
            } else {
                contribution_at_root.apply(hdr, meta);
            }
        } else {
            contribution.apply(hdr, meta);
        }
    }
}

/* Repairs, after AggClassify (the v1model shim; the TNA shim does not call it yet). Hosts
 * resend a chunk whose RESULT is late one at a time, in member order, so a resend must repair
 * whatever held the chunk, wherever that is:
 * - a resent REDUCE (RETRANSMIT) that finds the slot incomplete with its child recorded *asks*
 *   the children still missing (AGG_ASK: the REDUCE sent down to them), instead of being
 *   dropped as a duplicate;
 * - an ask (a REDUCE from the parent port) is answered by a complete slot with its aggregate
 *   (SEND_UP: the partial went up and was lost), and passed by an incomplete one to its own
 *   missing children; a host asked resends its contribution. A slot that holds the result
 *   already ignores an ask (it is older than the RESULT that passed here).
 * Without a loss nothing changes: a REDUCE from a child never carries RETRANSMIT the first
 * time, and the parent sends REDUCEs down only to ask. */
void agg_repair(in bit<8> op, in bit<8> flags, in port_bitmap_t previous,
                in port_bitmap_t in_port_bit, in port_bitmap_t child_mask,
                inout bit<8> verdict, inout bit<8> lane_mode, inout bit<8> reason) {
    if (op != OP_REDUCE) {
        return;
    }
    if (agg_is_ask(op, in_port_bit, child_mask)) {
        reason = DROP_NONE;
        verdict = AGG_ASK;
        lane_mode = AGG_LANES_NONE;
        if ((previous & AGG_RESULT_KNOWN) != 0) {
            verdict = 0;
            reason = DROP_AGG_DUPLICATE;
        } else if (previous == child_mask) {
            verdict = AGG_SEND_UP;
            lane_mode = AGG_LANES_READ;
        }
    } else if (reason == DROP_AGG_DUPLICATE && (flags & FLAG_RETRANSMIT) != 0) {
        reason = DROP_NONE;
        verdict = AGG_ASK;
    }
}

/* Instances are numbered by the communicator's barrier epochs, so a reduction moves the barrier
 * slot's released epoch on like a barrier does (keeping later barriers inside their window):
 * when this switch sends the RESULT of an instance's last chunk (seg_idx + 1 = seg_count) down
 * the tree, released := epoch if epoch is newer (epoch_distance_after, common/barrier.p4).
 * The caller passes chunks_from_here = seg_count - seg_idx (1: the last chunk), computed in an
 * action (meta.agg_chunks_left): a Tofino gateway compares a field with a constant but cannot
 * subtract, and comparing seg_idx with another field would tie the two fields' PHV slicing. */
bool agg_releases_epoch(in bit<8> verdict, in bit<32> chunks_from_here) {
    return verdict == AGG_DISTRIBUTE && chunks_from_here == 1;
}

/* Signed 32-bit order as unsigned order: flip the sign bit. */
bool agg_signed_less(in bit<32> a, in bit<32> b) {
    return (a ^ 0x80000000) < (b ^ 0x80000000);
}

/* One lane of the reduction: op(stored, offered). Expressions only, so an architecture may
 * call it inside an action. */
bit<32> agg_combine(in bit<8> op, in bit<32> stored, in bit<32> offered) {
    /* P4's ?: binds tighter than ==: every condition is parenthesised */
    return (op == AGG_SUM) ? stored + offered
        : ((op == AGG_MIN) ? ((agg_signed_less(offered, stored)) ? offered : stored)
        : ((op == AGG_MAX) ? ((agg_signed_less(stored, offered)) ? offered : stored)
        : ((op == AGG_AND) ? stored & offered
        : ((op == AGG_OR) ? stored | offered
        : stored ^ offered))));
}

/* After AggState: turn the verdict into a packet to send. The lanes are already in hdr.agg.
 * payload_crc is not kept for REDUCE/RESULT (the switch rewrites the lanes): always 0. */
control ReduceDecide(inout headers_t hdr, inout coll_meta_t meta) {
    apply {
        if (meta.drop_reason != DROP_NONE) {
            return;
        }
        if (meta.agg_verdict == AGG_ABSORB) {
            meta.drop_reason = DROP_ABSORBED; /* recorded; waits for the other children */
            return;
        }
        hdr.coll.src_node = meta.my_node; /* every REDUCE/RESULT names the switch that sent it */
        hdr.coll.payload_crc = 0;
        if (meta.agg_verdict == AGG_ANSWER) {
            hdr.coll.op = OP_RESULT;
            hdr.coll.seq = 0; /* from a slot, not the root's completion: names nothing */
            meta.out_kind = OUT_REPLY;
        } else if (meta.agg_verdict == AGG_SEND_UP) {
            meta.out_kind = OUT_UNICAST;
            meta.out_port = meta.bar_parent;
        } else if (meta.agg_verdict == AGG_ASK) {
            meta.out_kind = OUT_MCAST; /* still a REDUCE: to the children not recorded */
            meta.mcast_children = meta.bar_child_mask & ~meta.agg_previous;
            meta.filter_children = 1;
        } else {
            if (hdr.coll.op == OP_REDUCE) {
                hdr.coll.seq = meta.agg_completed_before; /* the root's; a RESULT keeps it */
            }
            hdr.coll.op = OP_RESULT;
            meta.out_kind = OUT_MCAST;
            meta.mcast_children = meta.bar_child_mask;
            meta.filter_children = 1;
        }
    }
}

#endif /* NETCOLL_REDUCE_P4 */
