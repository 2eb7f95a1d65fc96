/* netcoll: the ingress logic every architecture runs, in order.
 *
 * The architecture shim fills the first fields of coll_meta_t, defines the state controls
 * TreeState, BarrierState (which applies AggState for a reduction) and AckState (the only
 * code that touches registers) before including this file, applies NetcollIngress, and then
 * carries out meta.out_kind and counts. A state control
 * that cannot finish the packet in this pass sets meta.state_op = STATE_NEXT_PASS: no decision
 * is taken (headers stay as parsed) and the shim carries the packet to the pass that can.
 */
#ifndef NETCOLL_INGRESS_P4
#define NETCOLL_INGRESS_P4

#include "constants.p4"
#include "headers.p4"
#include "forwarding.p4"
#include "broadcast.p4"
#include "barrier.p4"
#include "membership.p4"
#include "reduce.p4"
#include "ackmerge.p4"

control NetcollIngress(inout headers_t hdr, inout coll_meta_t meta) {
    Classify() classify;
    Route() route;
    BroadcastLookup() broadcast_lookup;
    BroadcastDecide() broadcast_decide;
    ChildReplication() child_replication;
    MembershipCheck() membership_check;
    LocalReply() local_reply;
    BarrierDecide() barrier_decide;
#ifndef NETCOLL_NO_REDUCTION
    ReduceDecide() reduce_decide;
#endif
    AggHeaderCheck() agg_header_check;
    AckMergeLookup() ack_merge_lookup;
    AckMergeDecide() ack_merge_decide;
    AckState() ack_state;
    TreeState() tree_state;
    BarrierState() barrier_state;

    apply {
        classify.apply(hdr, meta);
#ifndef NETCOLL_CLASSIFY_TABLE /* else zero-initialised, and Classify's table sets a barrier's */
        meta.state_op = STATE_NONE;
#endif
        /* state_op (and state_slot) are set in the lookups' actions or where the checks admit
         * the packet, never tested and set again after them: on Tofino each such step costs
         * a stage before every register. A lookup's state control runs only if its checks
         * left drop_reason DROP_NONE. */
        if (meta.class == CLASS_MCAST) {
            broadcast_lookup.apply(hdr, meta);
        } else if (meta.class == CLASS_BARRIER) {
#ifndef NETCOLL_CLASSIFY_TABLE /* else Classify's table made this test */
            if (hdr.coll.comm_id >= NETCOLL_COMM_SLOTS) {
                meta.drop_reason = DROP_COMM_RANGE;
            } else {
                meta.state_op = STATE_BARRIER_EVENT;
                meta.state_slot = hdr.coll.comm_id;
                meta.barrier_state_asked = 1;
            }
#endif
        } else if (meta.class == CLASS_AGG) {
            agg_header_check.apply(hdr, meta);
        } else if (meta.class == CLASS_ACK_MERGE) {
            ack_merge_lookup.apply(hdr, meta);
        } else if (meta.class == CLASS_LOCAL && hdr.coll.op == OP_MP) {
            membership_check.apply(hdr, meta);
        }

        /* one state control per pass (a reduction's BarrierState reads the tree, applies
         * AggState, then may advance the released epoch: agg_releases_epoch). BarrierState
         * first, on its own flag: a test of state_op waits on Tofino for every lookup that
         * writes it, and a barrier's is known from Classify's table (NETCOLL_CLASSIFY_TABLE). */
        if (meta.barrier_state_asked == 1) {
            barrier_state.apply(hdr, meta);
        } else if (meta.state_op == STATE_TREE_READ || meta.state_op == STATE_TREE_MP_WRITE
                || meta.state_op == STATE_TREE_MP_READ) {
            if (meta.drop_reason == DROP_NONE) {
                tree_state.apply(hdr, meta);
            }
        } else if (meta.state_op == STATE_ACK_EVENT) {
            if (meta.drop_reason == DROP_NONE) {
                ack_state.apply(hdr, meta);
            }
        }
        if (meta.state_op == STATE_NEXT_PASS) {
            return;
        }

        if (meta.class == CLASS_ROUTE) {
            route.apply(meta);
        } else if (meta.class == CLASS_MCAST) {
            if (meta.drop_reason == DROP_NONE) {
                broadcast_decide.apply(hdr, meta);
            }
        } else if (meta.class == CLASS_BARRIER) {
            barrier_decide.apply(hdr, meta);
        } else if (meta.class == CLASS_AGG) {
#ifndef NETCOLL_NO_REDUCTION /* else AggHeaderCheck dropped it */
            reduce_decide.apply(hdr, meta);
#endif
        } else if (meta.class == CLASS_ACK_MERGE) {
            /* admitted by its lookup: in the decisions' if/else, where Tofino sees it exclude
             * the others, not after the state controls, where every decision writing the
             * same fields waited for it */
            if (meta.ack_admitted == 1) {
                ack_merge_decide.apply(hdr, meta);
            }
        } else if (meta.class == CLASS_LOCAL) {
            local_reply.apply(hdr, meta);
        }

        child_replication.apply(meta); /* for a replication from a child bitmap */
    }
}

#endif /* NETCOLL_INGRESS_P4 */
