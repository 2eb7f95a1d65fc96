/* netcoll on TNA: the registers and the only code that reads and writes them.
 *
 * Tofino rules this file is written for (the type-checker enforces none of them, so the code
 * does; docs/porting-to-tofino.md has the review table of every RegisterAction):
 * - a Register is accessed at most once per packet per pass, by exactly one of its
 *   RegisterActions: each register below has ONE access block, an if/else choosing which
 *   RegisterAction runs, and blocks come in data-dependency order (a later block may use what
 *   an earlier one returned, never the reverse);
 * - a RegisterAction body is a stateful ALU program: at most two comparisons, add/subtract,
 *   and/or, one value returned. The bodies are written as the ALU's own conditionals, each with
 *   the semantics of the shared function of common/ it names (generation_ahead_is_newer,
 *   epoch_distance_after, barrier_arrivals_*, ack_cum_merge, agg_*): a body that calls the
 *   function is inlined into temporaries the ALU cannot hold;
 * - actions cannot test: conditions are if statements, never c ? a : b (but max(a, b) as
 *   (a > b) ? a : b, which the ALU has);
 * - registers and counters are indexed through the hash unit (index_bits.p4);
 * - registers are per pipe: only the state pipe's copies are used. A pass in another pipe
 *   touches none, returns STATE_NEXT_PASS and is steered there by the shim;
 * - a root's completion needs the released register after the cell register, i.e. a second
 *   access: it is finished in a resubmitted pass (arch_commit_pass), see BarrierState. Such a
 *   pass (and a REDUCE's first) sets arch_resubmit, not STATE_NEXT_PASS: the shared decisions
 *   then run as if the pass were final, and the shim resubmits instead of carrying them out
 *   (a resubmitted packet is the packet as it arrived). Waiting for STATE_NEXT_PASS, set by
 *   the last of the state's tables, would hold every decision back until then;
 * - a reduction's slot pass that releases its instance's epoch is finished by a release
 *   pass: the packet steered round once more with its aggregate (arch_release_next, then
 *   arch_release_pass), see BarrierState;
 * - a stateful ALU updates one register: the reduction keeps one register per lane, generated
 *   per lane by the preprocessor (NETCOLL_FOR_EACH_LANE), see AggLanes.
 */
#ifndef NETCOLL_TNA_STATE_P4
#define NETCOLL_TNA_STATE_P4

#include "../common/constants.p4"
#include "../common/headers.p4"
#include "../common/barrier.p4"
#include "../common/membership.p4"
#include "../common/reduce.p4"
#include "../common/ackmerge.p4"
#include "index_bits.p4"
#include "agg_decisions.p4"

/* Only the profile without the reduction has the barrier's register accesses written out
 * without MP writes and reads (BarrierState, access 3) */
#if defined(NETCOLL_NO_MINI_PACKETS) && !defined(NETCOLL_NO_REDUCTION)
#error "NETCOLL_NO_MINI_PACKETS needs NETCOLL_NO_REDUCTION"
#endif

/* The two 32-bit halves of one dual-width barrier cell (barrier_cell_t's [31:0] and [63:32]) */
struct barrier_cell_halves_t {
    port_bitmap_t arrivals;
    bit<32> tag;
}

control TreeState(inout headers_t hdr, inout coll_meta_t meta) {
    Register<bit<32>, bit<32>>(NETCOLL_TREE_SLOTS, 0) tree_generation;
    Register<port_num_t, bit<32>>(NETCOLL_TREE_SLOTS, 0) tree_parent;
    Register<port_bitmap_t, bit<32>>(NETCOLL_TREE_SLOTS, 0) tree_children;

    RegisterAction<bit<32>, bit<32>, bit<32>>(tree_generation) tree_generation_read = {
        void apply(inout bit<32> stored, out bit<32> result) {
            result = stored;
        }
    };
#ifndef NETCOLL_NO_MINI_PACKETS
    /* An MP write: take the offered generation if newer; return offered - stored, from which
     * mp_generation_status tells OK / DUPLICATE / STALE exactly as this condition decided
     * (the subtraction here, not in the match-action ALU: that would tie the PHV slicing of
     * the MP header to the register's output). */
    RegisterAction<bit<32>, bit<32>, bit<32>>(tree_generation) tree_generation_offer = {
        void apply(inout bit<32> stored, out bit<32> ahead) {
            ahead = hdr.mp.generation - stored;
            if ((int<32>) (hdr.mp.generation - stored) > 0) { /* generation_ahead_is_newer */
                stored = hdr.mp.generation;
            }
        }
    };
#endif
    RegisterAction<port_num_t, bit<32>, port_num_t>(tree_parent) tree_parent_read = {
        void apply(inout port_num_t stored, out port_num_t result) {
            result = stored;
        }
    };
#ifndef NETCOLL_NO_MINI_PACKETS
    RegisterAction<port_num_t, bit<32>, port_num_t>(tree_parent) tree_parent_write = {
        void apply(inout port_num_t stored) {
            stored = hdr.mp.parent_port;
        }
    };
#endif
    RegisterAction<port_bitmap_t, bit<32>, port_bitmap_t>(tree_children) tree_children_read = {
        void apply(inout port_bitmap_t stored, out port_bitmap_t result) {
            result = stored;
        }
    };
#ifndef NETCOLL_NO_MINI_PACKETS
    RegisterAction<port_bitmap_t, bit<32>, port_bitmap_t>(tree_children) tree_children_write = {
        void apply(inout port_bitmap_t stored) {
            stored = hdr.mp.children;
        }
    };
#endif

    apply {
        if (meta.arch_state_elsewhere == 1) {
            meta.state_op = STATE_NEXT_PASS;
            return;
        }
        /* every access indexes meta.state_slot, set where state_op was, widened where it is
         * used; the tests read state_op itself, not flags derived from it: a flag costs a
         * stage before its first use, and so would a local copy of the index, or setting a
         * 32-bit index from a 16-bit field (p4c writes the two halves in two tables) */

#ifdef NETCOLL_NO_MINI_PACKETS
        /* a broadcast's tree only (no MP: MembershipCheck): the three registers side by
         * side. tree_generation is read for nothing but its place in the program: the
         * control plane writes it (controller/tofino/bfrt.py) */
        tree_generation_read.execute((bit<32>) meta.state_slot);
        meta.tree_parent = tree_parent_read.execute((bit<32>) meta.state_slot);
        meta.tree_children = tree_children_read.execute((bit<32>) meta.state_slot);
#else
        /* access 1: tree_generation (not touched by a broadcast) */
        bit<32> generation = 0;
        if (meta.state_op == STATE_TREE_MP_WRITE) {
            meta.mp_ahead = tree_generation_offer.execute((bit<32>) meta.state_slot);
        } else if (meta.state_op == STATE_TREE_MP_READ) {
            generation = tree_generation_read.execute((bit<32>) meta.state_slot);
            meta.mp_status = MP_STATUS_OK;
        }

        /* access 2: tree_parent and tree_children, after the generation decided a write
         * (generation_ahead_is_newer(mp_ahead), one test per if) */
        if (meta.state_op == STATE_TREE_MP_WRITE) {
            meta.mp_status = mp_generation_status(meta.mp_ahead);
            if (meta.mp_ahead != 0) {
                if (meta.mp_ahead[31:31] == 0) {
                    tree_parent_write.execute((bit<32>) meta.state_slot);
                    tree_children_write.execute((bit<32>) meta.state_slot);
                }
            }
        } else {
            meta.tree_parent = tree_parent_read.execute((bit<32>) meta.state_slot);
            meta.tree_children = tree_children_read.execute((bit<32>) meta.state_slot);
            if (meta.state_op == STATE_TREE_MP_READ) {
                hdr.mp.parent_port = meta.tree_parent;
                hdr.mp.children = meta.tree_children;
                hdr.mp.generation = generation;
            }
        }
#endif
    }
}

/* A lane is one register and a stateful ALU holds four programs per register, so the six
 * operations map onto four: each lane is stored XORed with a per-operation mask, which turns
 * AND into OR (De Morgan: ~(~a | ~b) = a & b) and signed MIN and MAX into unsigned MIN (x ^
 * 0x80000000 orders signed values as unsigned ones, ~ of that reverses the order). The mask is
 * applied to the packet's lanes before the registers (AggLanes) and again in egress, so the
 * packet leaves with v1model's values. A read runs the ADD program, which leaves the lane as it
 * is unless asked to set or combine, whatever the operation: the lanes are masked before the
 * verdict, and nothing depends on it but which program runs. */

/* Lane i: its register and the four programs. Each stores the packet's (masked) lane when the
 * slot starts (AGG_LANES_SET), else combines (ADD only if asked to: it also serves reads), and
 * returns the lane after the update. */
#define TNA_AGG_LANE_REGISTER(i) \
    Register<bit<32>, bit<32>>(NETCOLL_AGG_SLOTS, 0) agg_lane_##i; \
    RegisterAction<bit<32>, bit<32>, bit<32>>(agg_lane_##i) agg_lane_##i##_add = { \
        void apply(inout bit<32> stored, out bit<32> result) { \
            if (meta.agg_lane_mode == AGG_LANES_SET) { \
                stored = hdr.agg.l##i; \
            } else if (meta.agg_lane_mode == AGG_LANES_COMBINE) { \
                stored = stored + hdr.agg.l##i; \
            } \
            result = stored; \
        } \
    }; \
    RegisterAction<bit<32>, bit<32>, bit<32>>(agg_lane_##i) agg_lane_##i##_xor = { \
        void apply(inout bit<32> stored, out bit<32> result) { \
            if (meta.agg_lane_mode == AGG_LANES_SET) { \
                stored = hdr.agg.l##i; \
            } else { \
                stored = stored ^ hdr.agg.l##i; \
            } \
            result = stored; \
        } \
    }; \
    RegisterAction<bit<32>, bit<32>, bit<32>>(agg_lane_##i) agg_lane_##i##_or = { \
        void apply(inout bit<32> stored, out bit<32> result) { \
            if (meta.agg_lane_mode == AGG_LANES_SET) { \
                stored = hdr.agg.l##i; \
            } else { \
                stored = stored | hdr.agg.l##i; \
            } \
            result = stored; \
        } \
    }; \
    RegisterAction<bit<32>, bit<32>, bit<32>>(agg_lane_##i) agg_lane_##i##_umin = { \
        void apply(inout bit<32> stored, out bit<32> result) { \
            if (meta.agg_lane_mode == AGG_LANES_SET || hdr.agg.l##i < stored) { \
                stored = hdr.agg.l##i; \
            } \
            result = stored; \
        } \
    };

/* Lane i into the register's representation, or back (AggMask) */
#define TNA_AGG_LANE_MASK(i) \
    hdr.agg.l##i = hdr.agg.l##i ^ lane_mask;

/* Each operation's lane program (add, xor, or, umin: the lane's four RegisterActions) and its
 * mask, as ENTRY(i, op, program, mask) for lane i (tables of the lanes) or for none (the
 * mask). Unknown operations were refused by admission. */
#define TNA_AGG_OP_ENTRIES(ENTRY, i) \
    ENTRY(i, AGG_SUM, add, 0) \
    ENTRY(i, AGG_XOR, xor, 0) \
    ENTRY(i, AGG_AND, or, 0xFFFFFFFF) /* OR on complements */ \
    ENTRY(i, AGG_OR, or, 0) \
    ENTRY(i, AGG_MIN, umin, 0x80000000) /* sign flipped */ \
    ENTRY(i, AGG_MAX, umin, 0x7FFFFFFF) /* order reversed */

/* The lanes into the register's representation, or back (XOR is its own inverse): a constant
 * table on the operation alone, so nothing makes it wait; the mask is its action's data (a
 * mask in PHV, read by every lane's instruction, tied the 32 lanes into one cluster Tofino 2's
 * PHV allocation could not place, p4c-barefoot 1.2.5.16). */
#define TNA_AGG_MASK_ENTRY(i, op, program, lane_mask) op: agg_lanes_xor(lane_mask);
control AggMask(inout headers_t hdr) {
    action agg_lanes_xor(bit<32> lane_mask) {
        NETCOLL_FOR_EACH_LANE(TNA_AGG_LANE_MASK)
    }
    table agg_op_mask {
        key = { hdr.coll.tree: exact; }
        actions = { agg_lanes_xor; }
        const entries = {
            TNA_AGG_OP_ENTRIES(TNA_AGG_MASK_ENTRY, none)
        }
        const default_action = agg_lanes_xor(0);
        size = 8;
    }
    apply {
        if (hdr.agg.isValid()) {
            agg_op_mask.apply();
        }
    }
}

/* Access A3 of lane i at the slot index: one of its four programs, chosen by a constant table
 * on the operation and the lane mode, both known once AggClassify has given its verdict. A
 * read runs ADD, which leaves the lane as it is; a pass without a lane mode (AGG_LANES_NONE)
 * matches nothing. The program is in each lane's own key: a table choosing it before the
 * lanes, keyed on the lane mode, took the stage after AggClassify and pushed Tofino 2's lanes
 * one stage later. A table, not an if/else per program: each branch was a table behind
 * gateways of its own, and Tofino 2's table placement of the 32 lanes ran out of memory
 * (17 GB, p4c-barefoot 1.2.5.16). (An action that addresses a register through the hash unit
 * cannot be a default.) */
#define TNA_AGG_LANE_ENTRY(i, op, program, lane_mask) \
    (op, AGG_LANES_READ): agg_lane_##i##_run_add(); \
    (op, AGG_LANES_SET): agg_lane_##i##_run_##program(); \
    (op, AGG_LANES_COMBINE): agg_lane_##i##_run_##program();
#define TNA_AGG_LANE_EXECUTE(i) \
    action agg_lane_##i##_run_add() { hdr.agg.l##i = agg_lane_##i##_add.execute(lane_slot); } \
    action agg_lane_##i##_run_xor() { hdr.agg.l##i = agg_lane_##i##_xor.execute(lane_slot); } \
    action agg_lane_##i##_run_or() { hdr.agg.l##i = agg_lane_##i##_or.execute(lane_slot); } \
    action agg_lane_##i##_run_umin() { hdr.agg.l##i = agg_lane_##i##_umin.execute(lane_slot); } \
    table agg_lane_##i##_program { \
        key = { \
            hdr.coll.tree: exact; \
            meta.agg_lane_mode: exact; \
        } \
        actions = { \
            agg_lane_##i##_run_add; agg_lane_##i##_run_xor; agg_lane_##i##_run_or; \
            agg_lane_##i##_run_umin; NoAction; \
        } \
        const entries = { \
            TNA_AGG_OP_ENTRIES(TNA_AGG_LANE_ENTRY, i) \
        } \
        const default_action = NoAction(); \
        size = 18; \
    }

#define TNA_AGG_LANE_APPLY(i) agg_lane_##i##_program.apply();

/* The slot's lanes (access A3), applied by the shim after NetcollIngress: nothing after the
 * lanes reads them, and in a block of their own at the end of ingress they keep every
 * decision (the barrier's too: Tofino 1 has no long branches, so a table after an if/else
 * waits for the last tables of its branches) from waiting for them. Every packet with lanes
 * is masked here, before the lanes, and unmasked by TnaEgress's first table, so the packet
 * carries v1model's values and a steered or released one its lanes unchanged; unmasking at
 * the end of ingress took a stage after the last lane. */
control AggLanes(inout headers_t hdr, in coll_meta_t meta) {
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) agg_lane_slot_hash;
    NETCOLL_FOR_EACH_LANE(TNA_AGG_LANE_REGISTER)
    bit<32> lane_slot; /* AggState's slot index (one hash per register: these are others) */
    NETCOLL_FOR_EACH_LANE(TNA_AGG_LANE_EXECUTE)
    AggMask() mask;

    apply {
        if (hdr.agg.isValid()) {
            lane_slot = agg_lane_slot_hash.get({hdr.coll.comm_id,
                                                hdr.coll.seg_idx[TNA_AGG_WINDOW_BITS - 1:0]});
            mask.apply(hdr); /* into the register's representation */
            NETCOLL_FOR_EACH_LANE(TNA_AGG_LANE_APPLY)
        }
    }
}

/* Aggregation slots (common/reduce.p4), applied by BarrierState after B2 read the tree into
 * meta.bar_* (outside the state pipe BarrierState defers the packet first). Access blocks in
 * pipeline order: A1 agg_slot_owner and agg_key, A2 agg_arrived, A4 agg_completed (after the
 * verdict); A3, the lanes, is AggLanes at the end of ingress. */
control AggState(inout headers_t hdr, inout coll_meta_t meta) {
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) agg_slot_hash;
    Register<bit<32>, bit<32>>(NETCOLL_AGG_SLOTS, 0) agg_slot_owner; /* 0: never used */
    Register<bit<32>, bit<32>>(NETCOLL_AGG_SLOTS, 0) agg_key; /* the tag */
    Register<port_bitmap_t, bit<32>>(NETCOLL_AGG_SLOTS, 0) agg_arrived;
    /* the tag of the chunk the root completed last, per comm slot (common/reduce.p4) */
    Register<bit<32>, bit<32>>(NETCOLL_COMM_SLOTS, 0) agg_completed;

    /* agg_key_relation asks three questions (owner equal, tag equal, tag after) and a stateful
     * ALU has two comparison units, so the owner has its own register, taken unconditionally
     * (a packet that keeps the slot has the stored owner, so writing it changes nothing), and
     * the tag register takes the slot when the owner changed (the relation FRESH from the
     * owner register's result, stored ^ offered: 0 for the same owner) or the tag is after the
     * stored one; from its result the match-action stage refines the relation exactly as
     * agg_key_relation does. The tag register reads the 8-bit relation, not the 32-bit
     * change: with two 32-bit inputs p4c-barefoot 1.2.5.16 could not place its table ("could
     * not fit within the input crossbar by itself"). */
    RegisterAction<bit<32>, bit<32>, bit<32>>(agg_slot_owner) agg_owner_take = {
        void apply(inout bit<32> stored, out bit<32> change) {
            change = stored ^ meta.agg_owner;
            stored = meta.agg_owner;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(agg_key) agg_key_claim = {
        void apply(inout bit<32> stored, out bit<32> ahead) {
            ahead = meta.agg_tag - stored; /* agg_tag_after's distance, for the relation */
            if (meta.agg_relation == AGG_KEY_FRESH || (int<32>) (meta.agg_tag - stored) > 0) {
                stored = meta.agg_tag;
            }
        }
    };
    /* A REDUCE: add the child's bit (meta.arch_agg_arrival; to an empty set if the slot is
     * FRESH); return the set before it. Its inputs are the relation and one 32-bit operand
     * for both programs: a stateful ALU takes two input words, and the child bit, the child
     * mask and the relation would be three. */
    RegisterAction<port_bitmap_t, bit<32>, port_bitmap_t>(agg_arrived) agg_arrived_contribute = {
        void apply(inout port_bitmap_t stored, out port_bitmap_t previous) {
            if (meta.agg_relation == AGG_KEY_FRESH) {
                previous = 0;
                stored = meta.arch_agg_arrival;
            } else {
                previous = stored;
                stored = stored | meta.arch_agg_arrival;
            }
        }
    };
    /* A RESULT from the parent: every child counted, the result known (meta.arch_agg_arrival
     * is the child mask | AGG_RESULT_KNOWN). */
    RegisterAction<port_bitmap_t, bit<32>, port_bitmap_t>(agg_arrived) agg_arrived_finalise = {
        void apply(inout port_bitmap_t stored, out port_bitmap_t previous) {
            if (meta.agg_relation == AGG_KEY_FRESH) {
                previous = 0;
            } else {
                previous = stored;
            }
            stored = meta.arch_agg_arrival;
        }
    };

    /* A4, after the verdict: the chunk completed before this one, and this one in its place */
    RegisterAction<bit<32>, bit<32>, bit<32>>(agg_completed) agg_completed_swap = {
        void apply(inout bit<32> stored, out bit<32> before) {
            before = stored;
            stored = meta.agg_tag;
        }
    };

    /* The key in an action: inlined into tables, the functions' return values would be
     * temporaries, serialised one stage each. */
    action compute_slot_key() {
        meta.agg_tag = agg_tag(hdr.coll.epoch, hdr.coll.seg_idx);
        meta.agg_owner = agg_owner(meta.bar_generation);
    }
    /* What agg_arrived records: the child's bit, or for a RESULT the whole tree and the flag. */
    action arrival_of_child() {
        meta.arch_agg_arrival = meta.in_port_bit;
    }
    action arrival_of_result() {
        meta.arch_agg_arrival = meta.bar_child_mask | AGG_RESULT_KNOWN;
    }
    /* Operands of the decisions' tests, in actions (why: common/headers.p4, operands).
     * missing_after in two steps, the first before the slot: child mask ^ in_port_bit, then ^
     * the set before. That is child mask ^ (previous | in_port_bit) whenever the child was not
     * counted yet (in_port_bit, a child's, is then outside previous), the only case
     * AggClassify reads it; one action after the register, not two. */
    action compute_missing_before() {
        meta.missing_after = meta.bar_child_mask ^ meta.in_port_bit;
    }
    port_bitmap_t incomplete; /* AggClassifyTable's key: 0 when every child was counted */
    action compute_arrival_operands() {
        meta.missing_after = meta.missing_after ^ meta.agg_previous;
        incomplete = meta.agg_previous ^ meta.bar_child_mask;
        meta.in_port_match = meta.agg_previous & meta.in_port_bit; /* admission is past */
        meta.agg_result_known = meta.agg_previous & AGG_RESULT_KNOWN; /* see coll_meta_t */
    }

    AggAdmission() admission;
    AggRelationTable() refine_relation; /* agg_key_relation's last step (tna/agg_decisions.p4) */
    AggClassifyTable() classify; /* AggClassify as one table (tna/agg_decisions.p4) */

    apply {
        /* what needs no slot register first, so it is ready when the registers run: the
         * index, tag and owner, what agg_arrived records, the first step of missing_after */
        bit<32> slot = agg_slot_hash.get({hdr.coll.comm_id,
                                          hdr.coll.seg_idx[TNA_AGG_WINDOW_BITS - 1:0]});
        compute_slot_key();
        if (hdr.coll.op == OP_RESULT) {
            arrival_of_result();
        } else {
            arrival_of_child();
        }
        compute_missing_before();

        admission.apply(hdr, meta);
        if (meta.drop_reason != DROP_NONE) {
            return;
        }

        /* access A1: agg_slot_owner and agg_key; agg_tag_after(tag, stored) as a test of the
         * difference's sign, which a gateway can make (it cannot subtract) */
        meta.arch_agg_owner_change = agg_owner_take.execute(slot);
        if (meta.arch_agg_owner_change != 0) {
            meta.agg_relation = AGG_KEY_FRESH;
        } else {
            meta.agg_relation = AGG_KEY_SAME; /* not yet known: refined below */
        }
        meta.arch_agg_tag_ahead = agg_key_claim.execute(slot);
        refine_relation.apply(meta); /* a stale key is dropped (DROP_AGG_STALE) */
        if (meta.agg_relation != AGG_KEY_STALE) {
            /* access A2: agg_arrived */
            if (hdr.coll.op == OP_RESULT) {
                meta.agg_previous = agg_arrived_finalise.execute(slot);
            } else {
                meta.agg_previous = agg_arrived_contribute.execute(slot);
            }
            compute_arrival_operands();
            /* agg_lane_mode: what AggLanes does (access A3) */
            classify.apply(hdr, meta, incomplete);
            /* access A4: only the root distributes a REDUCE (comm_id is range-checked) */
            if (meta.agg_verdict == AGG_DISTRIBUTE && hdr.coll.op == OP_REDUCE) {
                meta.agg_completed_before = agg_completed_swap.execute((bit<32>) hdr.coll.comm_id);
            }
        }
    }
}

#ifndef NETCOLL_NO_REDUCTION
/* BarrierState's access to barrier_released (B3) */
const bit<3> RELEASED_ACCESS_NONE = 0;
const bit<3> RELEASED_ACCESS_READ = 1;
const bit<3> RELEASED_ACCESS_AHEAD = 2;
const bit<3> RELEASED_ACCESS_ADVANCE = 3;
const bit<3> RELEASED_ACCESS_WRITE = 4;
#endif

/* The row BarrierState's accesses index. Without MP it is always the packet's communicator,
 * read from the header: state_slot, which the broadcast's lookup writes too, made every
 * barrier register wait on Tofino for that lookup. */
#ifdef NETCOLL_NO_MINI_PACKETS
#define TNA_BARRIER_SLOT hdr.coll.comm_id
#else
#define TNA_BARRIER_SLOT meta.state_slot
#endif

control BarrierState(inout headers_t hdr, inout coll_meta_t meta) {
#ifndef NETCOLL_NO_REDUCTION
    AggState() agg_state;
    AggAdmission() window_admission;
#endif
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) barrier_cell_hash;
#ifndef NETCOLL_NO_REDUCTION
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) seg_idx_copy; /* compute_chunks_left */
#endif
    /* barrier_cell_tag(epoch, generation) = epoch ++ generation, through the hash unit: see
     * AckState's ack_tag_hash */
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) cell_tag_hash;
#ifndef NETCOLL_NO_MINI_PACKETS
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) open_cell_tag_hash;
#endif
    Register<bit<32>, bit<32>>(NETCOLL_COMM_SLOTS, 0) barrier_generation;
    Register<port_bitmap_t, bit<32>>(NETCOLL_COMM_SLOTS, 0) barrier_child_mask;
    Register<port_num_t, bit<32>>(NETCOLL_COMM_SLOTS, 0) barrier_parent;
    Register<epoch_t, bit<32>>(NETCOLL_COMM_SLOTS, 0) barrier_released;
    Register<barrier_cell_halves_t, bit<32>>(NETCOLL_BARRIER_CELLS, {0, 0}) barrier_cells;

#ifdef NETCOLL_NO_MINI_PACKETS
    /* the low half the cell tags use, straight into bar_generation: a copy of it out of a
     * 32-bit result cost a stage before the released epoch */
    RegisterAction<bit<32>, bit<32>, bit<16>>(barrier_generation) barrier_generation_read = {
        void apply(inout bit<32> stored, out bit<16> result) {
            result = stored[15:0];
        }
    };
#else
    RegisterAction<bit<32>, bit<32>, bit<32>>(barrier_generation) barrier_generation_read = {
        void apply(inout bit<32> stored, out bit<32> result) {
            result = stored;
        }
    };
#endif
#ifndef NETCOLL_NO_MINI_PACKETS
    /* As tree_generation_offer: returns offered - stored. */
    RegisterAction<bit<32>, bit<32>, bit<32>>(barrier_generation) barrier_generation_offer = {
        void apply(inout bit<32> stored, out bit<32> ahead) {
            ahead = hdr.mp.generation - stored;
            if ((int<32>) (hdr.mp.generation - stored) > 0) { /* generation_ahead_is_newer */
                stored = hdr.mp.generation;
            }
        }
    };
#endif
    RegisterAction<port_bitmap_t, bit<32>, port_bitmap_t>(barrier_child_mask)
            barrier_child_mask_read = {
        void apply(inout port_bitmap_t stored, out port_bitmap_t result) {
            result = stored;
        }
    };
#ifndef NETCOLL_NO_MINI_PACKETS
    RegisterAction<port_bitmap_t, bit<32>, port_bitmap_t>(barrier_child_mask)
            barrier_child_mask_write = {
        void apply(inout port_bitmap_t stored) {
            stored = hdr.mp.children;
        }
    };
#endif
    RegisterAction<port_num_t, bit<32>, port_num_t>(barrier_parent) barrier_parent_read = {
        void apply(inout port_num_t stored, out port_num_t result) {
            result = stored;
        }
    };
#ifndef NETCOLL_NO_MINI_PACKETS
    RegisterAction<port_num_t, bit<32>, port_num_t>(barrier_parent) barrier_parent_write = {
        void apply(inout port_num_t stored) {
            stored = hdr.mp.parent_port;
        }
    };
    /* An MP read: released itself. */
    RegisterAction<epoch_t, bit<32>, epoch_t>(barrier_released) barrier_released_read = {
        void apply(inout epoch_t stored, out epoch_t result) {
            result = stored;
        }
    };
#endif
    /* Every other read: the packet's epoch - released (meta.bar_ahead), the operand of the
     * decisions' tests, from the register itself: subtracting after it would cost a stage. */
    RegisterAction<epoch_t, bit<32>, epoch_t>(barrier_released) barrier_released_ahead = {
        void apply(inout epoch_t stored, out epoch_t ahead) {
            ahead = hdr.coll.epoch - stored;
        }
    };
    /* A RELEASE from the parent, the commit pass of a root's completion, a reduction's last
     * RESULT: move to the packet's epoch if it is newer; the returned epoch - the old value
     * lets BarrierClassify (or the commit pass) see exactly what this condition saw. */
    RegisterAction<epoch_t, bit<32>, epoch_t>(barrier_released) barrier_released_advance = {
        void apply(inout epoch_t stored, out epoch_t ahead) {
            ahead = hdr.coll.epoch - stored;
            if ((int<16>) (hdr.coll.epoch - stored) > 0) { /* epoch_distance_after */
                stored = hdr.coll.epoch;
            }
        }
    };
#ifndef NETCOLL_NO_MINI_PACKETS
    /* A new configuration starts from the MP's base epoch. */
    RegisterAction<epoch_t, bit<32>, epoch_t>(barrier_released) barrier_released_write = {
        void apply(inout epoch_t stored) {
            stored = hdr.mp.epoch;
        }
    };
#endif
    /* Record the child's arrival under meta.arch_cell_tag; return the bitmap after it. */
    RegisterAction<barrier_cell_halves_t, bit<32>, port_bitmap_t>(barrier_cells)
            barrier_cell_merge_arrival = {
        void apply(inout barrier_cell_halves_t cell, out port_bitmap_t arrived) {
            if (cell.tag == meta.arch_cell_tag) {
                cell.arrivals = cell.arrivals | meta.in_port_bit;
            } else {
                cell.arrivals = meta.in_port_bit;
            }
            cell.tag = meta.arch_cell_tag;
            arrived = cell.arrivals;
        }
    };
#ifndef NETCOLL_NO_MINI_PACKETS
    RegisterAction<barrier_cell_halves_t, bit<32>, port_bitmap_t>(barrier_cells)
            barrier_cell_read_arrivals = {
        void apply(inout barrier_cell_halves_t cell, out port_bitmap_t arrived) {
            if (cell.tag == meta.arch_cell_tag) {
                arrived = cell.arrivals;
            } else {
                arrived = 0;
            }
        }
    };
#endif

    /* BarrierDecide's asked ports, in missing_after (see there) */
    action compute_asked() {
        meta.missing_after = meta.bar_child_mask & ~meta.bar_arrived;
    }
    action ask_nobody() {
        meta.missing_after = 0;
    }

    /* Operands of the decisions' tests, in actions (why: common/headers.p4, operands) */
    action compute_config_operands() {
        meta.in_port_match = meta.bar_child_mask & meta.in_port_bit;
    }
    /* seg_count - seg_idx, with seg_idx read through the hash unit (arch_seg_idx): the ALU
     * subtracts whole containers, and the cell tags slice seg_idx into bytes */
#ifndef NETCOLL_NO_REDUCTION
    action copy_seg_idx() {
        meta.arch_seg_idx = seg_idx_copy.get({hdr.coll.seg_idx});
    }
    action compute_chunks_left() {
        meta.agg_chunks_left = hdr.coll.seg_count - meta.arch_seg_idx;
    }
#endif
    action compute_cell_tag() {
        meta.arch_cell_tag = cell_tag_hash.get({hdr.coll.epoch, meta.bar_generation});
    }

    BarrierClassify() classify;

    /* The passes (count, commit, REDUCE window, REDUCE/RESULT slot, MP write, MP read) are
     * told apart by testing state_op, arch_commit_pass and the op where they branch, in one
     * if/else per step: p4c-barefoot then knows the branches exclude each other and lets them
     * share stages, where flags computed up front cost a stage and serialise every pass's
     * tables behind every other's. */
    apply {
        /* outside the state pipe the packet touches no register; an if/else, not a return:
         * p4c turns a return into a flag set with state_op, and every table after it then
         * waited on Tofino for the lookups' writes of state_op */
        if (meta.arch_state_elsewhere == 1) {
            meta.state_op = STATE_NEXT_PASS;
        } else {
            /* every access but the cells' indexes meta.state_slot, set with state_op (comm_id,
             * or the MP's slot), widened where it is used: see TreeState */
#ifndef NETCOLL_NO_REDUCTION
            copy_seg_idx();
            compute_chunks_left();
#endif

            /* access 1: barrier_generation */
#ifdef NETCOLL_NO_MINI_PACKETS
            /* no MP write: the configuration registers are read side by side */
            meta.bar_generation = barrier_generation_read.execute((bit<32>) TNA_BARRIER_SLOT);
            meta.bar_child_mask = barrier_child_mask_read.execute((bit<32>) TNA_BARRIER_SLOT);
            meta.bar_parent = barrier_parent_read.execute((bit<32>) TNA_BARRIER_SLOT);
#else
            bit<32> generation = 0;
            if (meta.state_op == STATE_BARRIER_MP_WRITE) {
                meta.mp_ahead = barrier_generation_offer.execute((bit<32>) TNA_BARRIER_SLOT);
            } else {
                generation = barrier_generation_read.execute((bit<32>) TNA_BARRIER_SLOT);
            }
            meta.bar_generation = generation[15:0];

            /* access 2: barrier_child_mask and barrier_parent; an MP write is applied when its
             * generation is newer (generation_ahead_is_newer(mp_ahead), one test per if). Its
             * status is mp_generation_status(mp_ahead) written out in the same tests: the
             * function's result, copied out through a temporary, cost a stage that every pass
             * after the configuration waited for (an MP read writes mp_status too). */
            if (meta.state_op == STATE_BARRIER_MP_WRITE) {
                if (meta.mp_ahead == 0) {
                    meta.mp_status = MP_STATUS_DUPLICATE;
                } else if (meta.mp_ahead[31:31] == 0) {
                    meta.mp_status = MP_STATUS_OK;
                    barrier_child_mask_write.execute((bit<32>) TNA_BARRIER_SLOT);
                    barrier_parent_write.execute((bit<32>) TNA_BARRIER_SLOT);
                } else {
                    meta.mp_status = MP_STATUS_STALE;
                }
            } else {
                meta.bar_child_mask = barrier_child_mask_read.execute((bit<32>) TNA_BARRIER_SLOT);
                meta.bar_parent = barrier_parent_read.execute((bit<32>) TNA_BARRIER_SLOT);
            }
#endif
            compute_config_operands();

            /* From here on, each pass runs to its end in a branch of its own: Tofino 1 has no
             * long branches, so p4c-barefoot makes a gateway wait for every table before it that
             * feeds a table in its branches. In one if/else with the barrier's passes, a
             * reduction's slot waited for the MP read's open epoch (computed from released, for
             * the cell index), and so for released; here it starts right after the
             * configuration. */
#ifdef NETCOLL_NO_REDUCTION
            { /* no STATE_AGG_EVENT: AggHeaderCheck drops every REDUCE and RESULT */
#else
            if (meta.state_op == STATE_AGG_EVENT) {
                /* access 3 (barrier_released) on a reduction's release pass and on a REDUCE's
                 * first pass, nothing on a slot pass; these two executes and the four of the other
                 * branch are the register's six tables */
                if (meta.arch_release_pass == 1) {
                    /* a reduction's release pass, under the generation its slot pass saw (else an
                     * MP write replaced the configuration: dropped, as a barrier's commit pass) */
                    if (meta.bar_generation == meta.arch_commit_generation) {
                        meta.bar_ahead =
                            barrier_released_advance.execute((bit<32>) TNA_BARRIER_SLOT);
                        /* the slot pass's verdict: ReduceDecide sends the RESULT down the tree */
                        meta.agg_verdict = AGG_DISTRIBUTE;
                    } else {
                        meta.drop_reason = DROP_BARRIER_UNCONFIGURED;
                    }
                } else if (hdr.coll.op == OP_REDUCE && meta.arch_commit_pass == 0) {
                    /* a REDUCE's first pass: admitted and within its window, it goes round again */
                    window_admission.apply(hdr, meta);
                    meta.bar_ahead = barrier_released_ahead.execute((bit<32>) TNA_BARRIER_SLOT);
                    if (meta.drop_reason == DROP_NONE) {
                        /* agg_epoch_in_window for a REDUCE, one test per if: in the window
                         * (!beyond_window), or not after released (a late contribution) */
                        if ((meta.bar_ahead & BARRIER_WINDOW_FLOOR_MASK) == 0) {
                            meta.arch_resubmit = 1;
                        } else if (meta.bar_ahead == NETCOLL_BARRIER_WINDOW) {
                            meta.arch_resubmit = 1;
                        } else if (meta.bar_ahead >= 0x8000) {
                            meta.arch_resubmit = 1;
                        } else {
                            meta.drop_reason = DROP_OUT_OF_WINDOW;
                        }
                    }
                } else {
                    /* the reduction's slot: AggState's A1 and A2 (A3: AggLanes). The instance's
                     * last RESULT (agg_releases_epoch) is decided here and goes out from a release
                     * pass of its own, which advances released: an advance here would place
                     * barrier_released, and with it every barrier's chain, after this slot's. */
                    agg_state.apply(hdr, meta);
                    if (agg_releases_epoch(meta.agg_verdict, meta.agg_chunks_left)) {
                        meta.arch_release_next = 1;
                    }
                }
            } else {
#endif
#ifdef NETCOLL_NO_REDUCTION
                /* access 3: barrier_released, one execute in each branch of the tests that choose
                 * it (eight tables of the register, which placement holds without the
                 * reduction's two): choosing first, into a variable tested after, cost a stage.
                 * The count pass advances it only for a RELEASE from the parent
                 * (BarrierClassify's tests for BARRIER_ADVANCE's sender); the commit pass only if
                 * the slot is still this root's, under the configuration generation the
                 * completion was counted under (an MP write in between replaced it: the
                 * completion no longer stands and the packet is dropped). One test per if: a
                 * gateway reads at most 4 bytes. */
#ifndef NETCOLL_NO_MINI_PACKETS
                if (meta.state_op == STATE_BARRIER_MP_WRITE) {
                    if (meta.mp_ahead != 0) {
                        if (meta.mp_ahead[31:31] == 0) {
                            barrier_released_write.execute((bit<32>) TNA_BARRIER_SLOT);
                        }
                    }
                } else if (meta.state_op == STATE_BARRIER_MP_READ) {
                    meta.bar_released = barrier_released_read.execute((bit<32>) TNA_BARRIER_SLOT);
                } else
#endif
                if (meta.state_op == STATE_BARRIER_EVENT) {
                    if (meta.arch_commit_pass == 1) {
                        /* only where it stands; the verdict below drops the others (a drop
                         * reason written here made this stage wait for every lookup's) */
                        if (meta.bar_parent == 0) {
                            if (meta.bar_child_mask != 0) {
                                if (meta.bar_generation == meta.arch_commit_generation) {
                                    meta.bar_ahead = barrier_released_advance.execute(
                                        (bit<32>) TNA_BARRIER_SLOT);
                                    meta.arch_commit_stands = 1;
                                }
                            }
                        }
                    } else {
                        compute_cell_tag();
                        if (hdr.coll.op != OP_RELEASE) {
                            meta.bar_ahead =
                                barrier_released_ahead.execute((bit<32>) TNA_BARRIER_SLOT);
                        } else if (meta.bar_parent == 0) {
                            meta.bar_ahead =
                                barrier_released_ahead.execute((bit<32>) TNA_BARRIER_SLOT);
                        } else if (meta.in_port != meta.bar_parent) {
                            meta.bar_ahead =
                                barrier_released_ahead.execute((bit<32>) TNA_BARRIER_SLOT);
                        } else if (meta.bar_child_mask == 0) {
                            meta.bar_ahead =
                                barrier_released_ahead.execute((bit<32>) TNA_BARRIER_SLOT);
                        } else { /* a RELEASE from the parent */
                            meta.bar_ahead =
                                barrier_released_advance.execute((bit<32>) TNA_BARRIER_SLOT);
                        }
                    }
                }
#else
                /* access 3: barrier_released, its access chosen per pass (each branch sets it
                 * once, and the passes exclude each other), then one execute per program: an
                 * execute in every branch would ask for ten tables in the register's one stage,
                 * more than placement can hold. The count pass advances it only for a RELEASE
                 * from the parent (BarrierClassify's tests for BARRIER_ADVANCE's sender); the
                 * commit pass only if the slot is still this root's, under the configuration
                 * generation the completion was counted under (an MP write in between replaced
                 * it: the completion no longer stands and the packet is dropped). One test per
                 * if: a gateway reads at most 4 bytes. */
                bit<3> released_access = RELEASED_ACCESS_NONE;
                if (meta.state_op == STATE_BARRIER_MP_WRITE) {
                    if (meta.mp_ahead != 0) {
                        if (meta.mp_ahead[31:31] == 0) {
                            released_access = RELEASED_ACCESS_WRITE;
                        }
                    }
                } else if (meta.state_op == STATE_BARRIER_MP_READ) {
                    released_access = RELEASED_ACCESS_READ;
                } else if (meta.state_op == STATE_BARRIER_EVENT) {
                    if (meta.arch_commit_pass == 1) {
                        if (meta.bar_parent == 0) {
                            if (meta.bar_child_mask != 0) {
                                if (meta.bar_generation == meta.arch_commit_generation) {
                                    released_access = RELEASED_ACCESS_ADVANCE; /* it stands */
                                }
                            }
                        }
                    } else {
                        compute_cell_tag();
                        if (hdr.coll.op != OP_RELEASE) {
                            released_access = RELEASED_ACCESS_AHEAD;
                        } else if (meta.bar_parent == 0) {
                            released_access = RELEASED_ACCESS_AHEAD;
                        } else if (meta.in_port != meta.bar_parent) {
                            released_access = RELEASED_ACCESS_AHEAD;
                        } else if (meta.bar_child_mask == 0) {
                            released_access = RELEASED_ACCESS_AHEAD;
                        } else {
                            /* a RELEASE from the parent */
                            released_access = RELEASED_ACCESS_ADVANCE;
                        }
                    }
                }
                if (released_access == RELEASED_ACCESS_WRITE) {
                    barrier_released_write.execute((bit<32>) TNA_BARRIER_SLOT);
                } else if (released_access == RELEASED_ACCESS_READ) {
                    meta.bar_released = barrier_released_read.execute((bit<32>) TNA_BARRIER_SLOT);
                } else if (released_access == RELEASED_ACCESS_AHEAD) {
                    meta.bar_ahead = barrier_released_ahead.execute((bit<32>) TNA_BARRIER_SLOT);
                } else if (released_access == RELEASED_ACCESS_ADVANCE) {
                    meta.bar_ahead = barrier_released_advance.execute((bit<32>) TNA_BARRIER_SLOT);
                }

#endif
                /* access 4's index, barrier_cell_index(slot, epoch): one hash of fields set on
                 * the two paths (two hashes of one register crash p4c-barefoot 1.2.5.16, and a
                 * second call of one hash gets no control-plane API); an MP read asks about the
                 * open epoch */
                bit<TNA_BARRIER_WINDOW_BITS> cell_low =
                    hdr.coll.epoch[TNA_BARRIER_WINDOW_BITS - 1:0];
#ifndef NETCOLL_NO_MINI_PACKETS
                epoch_t open_epoch = meta.bar_released + 1;
                if (meta.state_op == STATE_BARRIER_MP_READ) {
                    cell_low = open_epoch[TNA_BARRIER_WINDOW_BITS - 1:0];
                    meta.arch_cell_tag = open_cell_tag_hash.get({open_epoch, meta.bar_generation});
                }
#endif
                bit<32> cell = barrier_cell_hash.get({TNA_BARRIER_SLOT, cell_low});

                /* the verdict, from what the accesses returned, and access 4: barrier_cells */
                if (meta.state_op == STATE_BARRIER_EVENT) {
                    if (meta.arch_commit_pass == 0) {
                        classify.apply(hdr, meta);
                        if (meta.bar_verdict == BARRIER_COUNT) {
                            meta.bar_arrived = barrier_cell_merge_arrival.execute(cell);
                            /* BarrierDecide's asked ports (NETCOLL_SHIM_COMPUTES_ASKED), read only
                             * after a count: the children not recorded yet, when the slot released
                             * the epoch before */
                            if (meta.bar_ahead == 1) {
                                compute_asked();
                            } else {
                                ask_nobody();
                            }
                            if (meta.bar_arrived == meta.bar_child_mask) {
                                meta.bar_complete = 1;
                                /* A root that just completed must also advance its released
                                 * epoch: a second access to barrier_released, so the shim
                                 * resubmits the packet and the commit pass does it. */
                                if (meta.bar_parent == 0) {
                                    meta.arch_commit_generation = meta.bar_generation;
                                    meta.arch_resubmit = 1;
                                }
                            } else {
                                meta.bar_complete = 0;
                            }
                        }
#ifdef NETCOLL_NO_REDUCTION
                    } else if (meta.arch_commit_stands == 0) {
                        /* the completion no longer stands (see access 3) */
                        meta.drop_reason = DROP_BARRIER_UNCONFIGURED;
#else
                    } else if (released_access != RELEASED_ACCESS_ADVANCE) {
                        /* the completion no longer stands (see access 3) */
                        meta.drop_reason = DROP_BARRIER_UNCONFIGURED;
#endif
                    } else if (epoch_distance_after(meta.bar_ahead)) {
                        /* this pass released the epoch: BarrierDecide sends RELEASE down */
                        meta.bar_verdict = BARRIER_COUNT;
                        meta.bar_complete = 1;
                    } else {
                        /* a duplicate completion raced this one: answer it as a released epoch */
                        meta.bar_verdict = BARRIER_ANSWER_RELEASE;
                    }
#ifndef NETCOLL_NO_MINI_PACKETS
                } else if (meta.state_op == STATE_BARRIER_MP_READ) {
                    hdr.mp.aux = barrier_cell_read_arrivals.execute(cell); /* the open epoch's */
                    hdr.mp.children = meta.bar_child_mask;
                    hdr.mp.parent_port = meta.bar_parent;
                    hdr.mp.generation = generation;
                    hdr.mp.epoch = meta.bar_released;
                    meta.mp_status = MP_STATUS_OK;
#endif
                }
            }
        }
    }
}

/* The two halves of one ACK-merge cum cell: the lowest cum claimed under the tag. */
struct ack_cum_halves_t {
    bit<32> cum;
    bit<32> tag;
}

/* ACK-merge cells (common/ackmerge.p4): two dual-width registers, one access each per packet
 * (K1 the child bitmap, K2 the lowest cum claimed); the slot's configuration comes from the
 * ack_merge table, not from registers. */
control AckState(inout headers_t hdr, inout coll_meta_t meta) {
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) ack_cell_hash;
    /* The cell tags (ack_cell_tag here, barrier_cell_tag in BarrierState: the fields one after
     * the other) come out of the hash unit as one word: concatenated in an action, the tag is
     * sliced where its pieces are (seg_idx[2:0] is in the cell index, so [2:0] and [7:3]), and
     * the backtracking PHV allocation put two slices of one byte in two containers, which a
     * stateful ALU's input crossbar cannot read ("could not fit within the input crossbar by
     * itself", all four cell registers' tables, p4c-barefoot 1.2.5.16). */
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) ack_tag_hash;
    /* ack_cell_tag(epoch, generation, seg_idx), in an action, a table of its own: with the
     * index's hash in one table the two 32-bit hash outputs did not fit one table's input
     * crossbar ("could not fit within the input crossbar by itself") */
    action compute_ack_cell_tag() {
        meta.arch_cell_tag = ack_tag_hash.get({hdr.coll.epoch, meta.ack_generation,
                                               hdr.coll.seg_idx[7:0]});
    }
    Register<barrier_cell_halves_t, bit<32>>(NETCOLL_ACK_CELLS, {0, 0}) ack_cells;
    Register<ack_cum_halves_t, bit<32>>(NETCOLL_ACK_CELLS, {0, 0}) ack_cums;

    /* Record the child's ACK under meta.arch_cell_tag; return the bitmap before it. */
    RegisterAction<barrier_cell_halves_t, bit<32>, port_bitmap_t>(ack_cells) ack_cell_merge = {
        void apply(inout barrier_cell_halves_t cell, out port_bitmap_t previous) {
            if (cell.tag == meta.arch_cell_tag) {
                previous = cell.arrivals;
                cell.arrivals = cell.arrivals | meta.in_port_bit;
            } else {
                previous = 0;
                cell.arrivals = meta.in_port_bit;
            }
            cell.tag = meta.arch_cell_tag;
        }
    };

    /* Keep the lowest cum claimed under meta.arch_cell_tag (ack_cum_merge); return it. */
    RegisterAction<ack_cum_halves_t, bit<32>, bit<32>>(ack_cums) ack_cum_lowest = {
        void apply(inout ack_cum_halves_t cell, out bit<32> lowest) {
            if (cell.tag != meta.arch_cell_tag || hdr.coll.seq <= cell.cum) {
                cell.cum = hdr.coll.seq; /* ack_cum_merge: the lower, or this one if new */
            }
            cell.tag = meta.arch_cell_tag;
            lowest = cell.cum;
        }
    };

    apply {
        /* outside the state pipe the packet touches no register; an if/else, not a return:
         * p4c turns a return into a flag set with state_op, and every table after it then
         * waited on Tofino for the lookups' writes of state_op */
        if (meta.arch_state_elsewhere == 1) {
            meta.state_op = STATE_NEXT_PASS;
        } else {
            bit<32> cell_index = ack_cell_hash.get({meta.ack_slot,
                                                    hdr.coll.seg_idx[TNA_ACK_WINDOW_BITS - 1:0]});
            /* access K1: ack_cells */
            compute_ack_cell_tag();
            meta.ack_previous = ack_cell_merge.execute(cell_index);
            /* access K2: ack_cums */
            meta.ack_cum = ack_cum_lowest.execute(cell_index);
        }
    }
}

#endif /* NETCOLL_TNA_STATE_P4 */
