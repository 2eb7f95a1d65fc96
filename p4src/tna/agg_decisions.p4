/* AggState's decisions as constant ternary tables (the TNA shim's; v1model keeps the if
 * statements of common/reduce.p4, which the BMv2 tests check against the reference model).
 * On Tofino each branch of an if statement that writes a field is a logical table, and table
 * placement is bound by logical tables per stage (16 on Tofino 2, ingress and egress together).
 * tests/unit/test_tofino_agg_decisions.py checks every entry against the reference model
 * (controller/switch_rules.py) for every combination of the tables' inputs.
 */
#ifndef NETCOLL_TNA_AGG_DECISIONS_P4
#define NETCOLL_TNA_AGG_DECISIONS_P4

#include "../common/constants.p4"
#include "../common/headers.p4"

/* agg_key_relation's last step (common/reduce.p4), after agg_key_claim: the relation the owner
 * register gave (FRESH when the owner changed, else SAME for now), refined by the tag's
 * distance ahead = tag - stored (0: the same chunk; bit 31 clear: a newer one; set: older, a
 * stale packet dropped). Four tables and three gateways over two stages as if statements. */
control AggRelationTable(inout coll_meta_t meta) {
    action relation(bit<8> value) {
        meta.agg_relation = value;
    }
    action stale() {
        meta.agg_relation = AGG_KEY_STALE;
        meta.drop_reason = DROP_AGG_STALE;
    }

    table agg_relation_of {
        key = {
            meta.agg_relation : ternary @name("relation");
            meta.arch_agg_tag_ahead : ternary @name("ahead");
        }
        actions = { relation; stale; }
        const entries = {
            (AGG_KEY_FRESH, _): relation(AGG_KEY_FRESH);
            (_, 0): relation(AGG_KEY_SAME);
            (_, 0 &&& 0x80000000): relation(AGG_KEY_FRESH);
        }
        const default_action = stale(); /* bit 31 set: the tag is behind the slot's */
    }

    apply {
        agg_relation_of.apply();
    }
}

/* AggClassify (common/reduce.p4) as one table: its if statements were sixteen tables on
 * Tofino 2 (p4c-barefoot 1.2.5.16), all in the stage after the slot register. The decision
 * reads seven tests, each a field the stage before computes (AggState's actions): first entry
 * first, a key a test does not read is _, "!= 0" is the _ after a 0 entry.
 *
 * Inputs (none reaches here stale: AggState drops a stale key first):
 *   op                  REDUCE or RESULT
 *   agg_result_known    agg_previous & AGG_RESULT_KNOWN
 *   bar_parent          0 at the tree's root
 *   incomplete          agg_previous ^ bar_child_mask (0: every child counted before)
 *   in_port_match       agg_previous & in_port_bit (this child counted already)
 *   agg_relation        AGG_KEY_FRESH or AGG_KEY_SAME
 *   missing_after       the children still missing with this packet (read only when the
 *                       child was not counted)
 */
control AggClassifyTable(in headers_t hdr, inout coll_meta_t meta, in port_bitmap_t incomplete) {
    action decide(bit<8> verdict, bit<8> lane_mode) {
        meta.agg_verdict = verdict;
        meta.agg_lane_mode = lane_mode;
        meta.drop_reason = DROP_NONE;
    }
    action duplicate() {
        meta.agg_verdict = 0;
        meta.agg_lane_mode = AGG_LANES_NONE;
        meta.drop_reason = DROP_AGG_DUPLICATE; /* counted once already */
    }

    table agg_classification {
        key = {
            hdr.coll.op : ternary @name("op");
            meta.agg_result_known : ternary @name("result_known");
            meta.bar_parent : ternary @name("parent");
            incomplete : ternary @name("incomplete");
            meta.in_port_match : ternary @name("counted");
            meta.agg_relation : ternary @name("relation");
            meta.missing_after : ternary @name("missing_after");
        }
        actions = { decide; duplicate; }
        const entries = {
            /* a RESULT from the parent: kept, and sent to every child */
            (OP_RESULT, _, _, _, _, _, _): decide(AGG_DISTRIBUTE, AGG_LANES_SET);
            /* at the root, complete means the result is known */
            (_, 0, 0, 0, _, _, _): decide(AGG_ANSWER, AGG_LANES_READ);
            /* a child not counted yet: recorded, and sent on once it completes the slot */
            (_, 0, 0, _, 0, AGG_KEY_FRESH, 0): decide(AGG_DISTRIBUTE, AGG_LANES_SET);
            (_, 0, 0, _, 0, _, 0): decide(AGG_DISTRIBUTE, AGG_LANES_COMBINE);
            (_, 0, _, _, 0, AGG_KEY_FRESH, 0): decide(AGG_SEND_UP, AGG_LANES_SET);
            (_, 0, _, _, 0, _, 0): decide(AGG_SEND_UP, AGG_LANES_COMBINE);
            (_, 0, _, _, 0, AGG_KEY_FRESH, _): decide(AGG_ABSORB, AGG_LANES_SET);
            (_, 0, _, _, 0, _, _): decide(AGG_ABSORB, AGG_LANES_COMBINE);
            /* counted already: a complete slot's partial goes up again (it may have been
             * lost), else a duplicate */
            (_, 0, _, 0, _, _, _): decide(AGG_SEND_UP, AGG_LANES_READ);
            (_, 0, _, _, _, _, _): duplicate();
        }
        /* what is left: agg_result_known != 0, a late or repeated contribution answered */
        const default_action = decide(AGG_ANSWER, AGG_LANES_READ);
    }

    apply {
        agg_classification.apply();
    }
}

#endif /* NETCOLL_TNA_AGG_DECISIONS_P4 */
