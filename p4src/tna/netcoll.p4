/* netcoll for Tofino (TNA on Tofino 1, T2NA on Tofino 2).
 *
 * The thin TNA shim, the counterpart of p4src/v1model/netcoll.p4: it turns intrinsic and port
 * metadata into coll_meta_t, runs the shared logic of common/ (NetcollIngress, with the state
 * controls of tna/state.p4), and carries out the decision with Tofino's means:
 *   unicast / reply   -> ig_tm_md.ucast_egress_port, dev port from table dev_port_map
 *   multicast         -> ig_tm_md.mcast_grp_a (control-plane groups), ingress-port pruning by
 *                        the traffic manager: rid = NETCOLL_REPLICA_RID, level-2 exclusion id =
 *                        the logical ingress port, $pre.prune[p] = {dev port of p}
 *   drop              -> ig_dprsr_md.drop_ctl
 *   state elsewhere   -> steered to the state pipe's recirculation port (netcoll_steer_h)
 *   root completion   -> resubmitted once (netcoll_resubmit_h) to advance the released epoch
 *   reduction release -> steered once more (STEER_FLAG_RELEASE) to advance the released epoch
 * Egress gets what it needs in netcoll_bridge_h and applies the shared replica rules.
 * Build and checks: make build-tna; design: docs/porting-to-tofino.md.
 */
#include <core.p4>
/* children's replicas always come from the all-ports group, filtered in egress (the subset
 * layout is refused by controller/tofino/bfrt.py; common/broadcast.p4 says why it is out) */
#define NETCOLL_NO_SUBSET_GROUPS
/* bar_parent_bit would need a variable shift: always 0 here, so the barrier's echo branch that
 * reads it is left out (common/barrier.p4), and with it one 32-bit port bitmap from the PHV */
#define NETCOLL_NO_PARENT_BIT
/* ChildReplication's group check is made here, in the multicast's own branch */
#define NETCOLL_SHIM_CHECKS_GROUP
/* BarrierDecide's asked ports are computed in BarrierState, beside the completion test: in
 * BarrierDecide they cost a stage before its multicasts */
#define NETCOLL_SHIM_COMPUTES_ASKED
/* counter_column by a constant table (CounterColumn): its if statements were four tables */
#define NETCOLL_SHIM_COUNTER_COLUMN
/* Classify as one constant table (common/forwarding.p4): TNA ingress has no frame length */
#define NETCOLL_CLASSIFY_TABLE
/* MembershipCheck and LocalReply as one constant table each (common/membership.p4) */
#define NETCOLL_MEMBERSHIP_TABLES
/* BarrierState here never sets BARRIER_ASKED (a parent's ask read from the cell is
 * v1model's): BarrierDecide leaves that branch out, six tables */
#define NETCOLL_NO_BARRIER_ASKS
#if __TARGET_TOFINO__ == 2
#include <t2na.p4>
#else
#include <tna.p4>
#endif

#include "../common/constants.p4"
#include "../common/headers.p4"
#include "../common/parser.p4"
#include "../common/deparser.p4"
#include "../common/forwarding.p4"
#include "../common/egress.p4"
#include "headers.p4"
#include "state.p4"
#include "../common/ingress.p4"

/* counter_column (common/forwarding.p4) as one constant table: the op of a collective
 * packet (COLUMN_BAD_OP for an op out of range), COLUMN_IPV4, else COLUMN_OTHER. */
control CounterColumn(in headers_t hdr, out bit<8> column_out) {
    action column_of_op() {
        column_out = hdr.coll.op;
    }
    action column(bit<8> value) {
        column_out = value;
    }
    table counter_column_of {
        key = {
            hdr.coll.isValid() : exact @name("coll_valid");
            hdr.coll.op : range @name("op");
            hdr.ipv4.isValid() : ternary @name("ipv4_valid");
        }
        actions = { column_of_op; column; }
        const entries = {
            (true, 1 .. OP_MAX, _): column_of_op();
            (true, _, _): column(COLUMN_BAD_OP);
            (false, _, true): column(COLUMN_IPV4);
        }
        const default_action = column(COLUMN_OTHER);
        size = 4;
    }
    apply {
        counter_column_of.apply();
    }
}

parser TnaIngressParser(packet_in pkt, out tna_headers_t hdr, out tna_ingress_meta_t md,
                        out ingress_intrinsic_metadata_t ig_intr_md) {
    CollParser() coll_parser;

    state start {
        md = { ... }; /* all zero, as the shared logic (written for v1model) expects */
        pkt.extract(ig_intr_md);
        /* the bytes after the intrinsic metadata are port metadata, or resubmit data */
        transition select(ig_intr_md.resubmit_flag) {
            1: parse_resubmit;
            default: parse_port_metadata;
        }
    }

    /* Where the packet entered the switch, in logical port numbers, is set here: from the
     * port metadata, the resubmit data, or (on the state pipe's recirculation port) the steer
     * header. Set in the control, the choice cost every packet a stage before the port
     * lookup. The 8-bit ports go into the low byte (the rest is zero-initialised). */
    state parse_port_metadata {
        hdr.port_md = port_metadata_unpack<netcoll_port_md_h>(pkt);
#if __TARGET_TOFINO__ != 1
        pkt.advance(PORT_METADATA_SIZE - 64);
#endif
        md.coll.in_port[7:0] = hdr.port_md.logical_port;
        md.coll.in_port_bit = hdr.port_md.port_bit;
        transition select(hdr.port_md.flags) {
            PORT_FLAG_STEER_ENTRY &&& PORT_FLAG_STEER_ENTRY: parse_steer;
            default: parse_frame;
        }
    }

    /* the second pass of a root's barrier completion (tna/state.p4, BarrierState), in the
     * state pipe by construction; its resubmit data has the first pass's in_port */
    state parse_resubmit {
        pkt.extract(hdr.resubmit);
#if __TARGET_TOFINO__ != 1
        pkt.advance(64); /* Tofino 2 pads resubmit data to the 192-bit port metadata size */
#endif
        md.coll.in_port[7:0] = hdr.resubmit.in_port;
        md.coll.in_port_bit = hdr.resubmit.in_port_bit;
        md.coll.arch_commit_pass = 1;
        md.coll.arch_commit_generation = hdr.resubmit.commit_generation;
        transition select(hdr.resubmit.flags) {
            RESUBMIT_FLAG_STEERED &&& RESUBMIT_FLAG_STEERED: parse_resubmitted_steer;
            default: parse_frame;
        }
    }

    /* The steer header repeats itself on a resubmitted pass (a resubmitted packet is the
     * packet as it arrived); such a pass is never a release pass. */
    state parse_resubmitted_steer {
        pkt.extract(hdr.steer);
        transition parse_frame;
    }

    /* Only ports the control plane flagged STEER_ENTRY (the state pipe's recirculation port)
     * parse a steer header, so no host can claim another ingress port. Their port metadata
     * has logical port 0 and port bit 0 (controller/tofino/bfrt.py), and Tofino's parser
     * ORs a second write into a field: the steer header's values are what is left (p4c warns
     * that it cannot clear the first write; there is nothing to clear). */
    state parse_steer {
        pkt.extract(hdr.steer);
        md.coll.in_port = hdr.steer.in_port;
        md.coll.in_port_bit = hdr.steer.in_port_bit;
        transition select(hdr.steer.flags) {
            STEER_FLAG_RELEASE &&& STEER_FLAG_RELEASE: steer_release_pass;
            default: parse_frame;
        }
    }

    /* a reduction's release pass (tna/state.p4, BarrierState) */
    state steer_release_pass {
        md.coll.arch_release_pass = 1;
        md.coll.arch_commit_generation = hdr.steer.generation;
        transition parse_frame;
    }

    state parse_frame {
        coll_parser.apply(pkt, hdr.net);
        transition accept;
    }
}

/* p4c-barefoot 1.2.5.16 overlays the ACK-merge slot with temporaries of the barrier's
 * decision (the two paths exclude each other), places the temporaries' zeroing on the barrier
 * path, then stops on its own check that the ACK path's read comes first ("Metadata
 * initialization analysis incorrect ... overlap"): the slot keeps its own containers, and so
 * does an MP write's generation distance (overlaid with the reduction's lane mode, zeroed by
 * AggClassify). */
@pa_no_overlay("ingress", "md.coll.ack_slot")
@pa_no_overlay("ingress", "md.coll.mp_ahead")
/* The port bitmaps, one rotational cluster (actions combine them bit for bit), each in one
 * container: unsliced, PHV allocation's search for a slicing of the cluster and the headers
 * around it ran for more than 20 minutes (p4c-barefoot 1.2.5.16). */
@pa_atomic("ingress", "md.coll.in_port_bit")
@pa_atomic("ingress", "md.coll.in_port_match")
@pa_atomic("ingress", "md.coll.missing_after")
@pa_atomic("ingress", "md.coll.bar_child_mask")
@pa_atomic("ingress", "md.coll.bar_arrived")
@pa_atomic("ingress", "md.coll.agg_previous")
@pa_atomic("ingress", "md.coll.agg_result_known")
@pa_atomic("ingress", "md.coll.arch_agg_arrival")
@pa_atomic("ingress", "md.coll.ack_child_mask")
@pa_atomic("ingress", "md.coll.ack_previous")
@pa_atomic("ingress", "md.coll.ack_cell_after")
@pa_atomic("ingress", "md.coll.mcast_children")
@pa_atomic("ingress", "md.coll.tree_children")
control TnaIngress(inout tna_headers_t hdr, inout tna_ingress_meta_t md,
                   in ingress_intrinsic_metadata_t ig_intr_md,
                   in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) rx_index_hash;
    Counter<bit<32>, bit<32>>(NETCOLL_PORT_COUNTERS, CounterType_t.PACKETS_AND_BYTES) rx_port_op;
    Counter<bit<32>, bit<32>>(NETCOLL_DROP_REASONS, CounterType_t.PACKETS_AND_BYTES)
        drop_reasons;
    /* The two drops the shim decides last, each counted where it is decided: were they written
     * into drop_reason, drop_reasons would wait a stage for them (a 13th on Tofino 1). The
     * control plane adds them to drop_reasons' DROP_NO_ROUTE and DROP_EMPTY_TREE. */
    Counter<bit<32>, bit<32>>(1, CounterType_t.PACKETS_AND_BYTES) no_route_drops;
    Counter<bit<32>, bit<32>>(1, CounterType_t.PACKETS_AND_BYTES) empty_tree_drops;
    NetcollIngress() netcoll;
    CounterColumn() column_lookup;
#ifndef NETCOLL_NO_REDUCTION
    AggLanes() agg_lanes;
#endif

    action to_dev_port(PortId_t dev_port) {
        ig_tm_md.ucast_egress_port = dev_port;
    }

    /* A logical port the control plane has not mapped: treat as having no route. */
    action no_dev_port() {
        ig_dprsr_md.drop_ctl = 1;
        no_route_drops.count(0); /* DROP_NO_ROUTE */
    }

    /* Logical port -> dev port, for unicasts and replies (a reply's out_port is its in_port;
     * ports are data, not code). */
    table dev_port_map {
        key = { md.coll.out_port : exact @name("port"); }
        actions = { to_dev_port; no_dev_port; }
        default_action = no_dev_port();
        size = NETCOLL_MAX_PORTS;
    }

    /* The state pipe's recirculation port, for a release pass (its slot pass may be a
     * resubmitted one, which has no port metadata): a keyless table the control plane sets. */
    action steer_to(PortId_t dev_port) {
        ig_tm_md.ucast_egress_port = dev_port;
    }
    table state_pipe_steer_port {
        actions = { steer_to; }
        default_action = steer_to(0);
        size = 1;
    }

    /* A multicast's replica rules (the bridge flags egress applies) and its pruning
     * (level2_exclusion_id, from ingress_prune_id, kept or reset to prune nothing): one
     * constant table on the two bits, where if statements made five tables */
    action replica(bit<8> flags) {
        hdr.bridge.kind = BRIDGE_REPLICA;
        hdr.bridge.flags = flags;
        ig_tm_md.rid = NETCOLL_REPLICA_RID;
    }
    action replica_unpruned(bit<8> flags) {
        hdr.bridge.kind = BRIDGE_REPLICA;
        hdr.bridge.flags = flags;
        ig_tm_md.rid = NETCOLL_REPLICA_RID;
        ig_tm_md.level2_exclusion_id = L2_XID_NONE;
    }
    table replica_rules {
        key = {
            md.coll.filter_children : exact @name("filter_children");
            md.coll.prune_ingress : exact @name("prune_ingress");
        }
        actions = { replica; replica_unpruned; }
        const entries = {
            (0, 0): replica_unpruned(0);
            (0, 1): replica(BRIDGE_FLAG_PRUNE_INGRESS);
            (1, 0): replica_unpruned(BRIDGE_FLAG_FILTER_CHILDREN);
            (1, 1): replica(BRIDGE_FLAG_FILTER_CHILDREN | BRIDGE_FLAG_PRUNE_INGRESS);
        }
        const default_action = replica_unpruned(0); /* every pair has its entry */
        size = 4;
    }

    /* Logical port p -> level-2 exclusion id p ($pre.prune[p] holds p's dev port). A constant
     * table, not a cast of in_port: copying the 16-bit port into the 9-bit id ties their PHV
     * slicing to the TM field's and made PHV allocation fail (p4c-barefoot 1.2.5.16). */
    action prune_id(bit<9> xid) {
        ig_tm_md.level2_exclusion_id = xid;
    }
    table ingress_prune_id {
        key = { md.coll.in_port : exact @name("port"); }
        actions = { prune_id; }
        const entries = {
            1: prune_id(1);
            2: prune_id(2);
            3: prune_id(3);
            4: prune_id(4);
            5: prune_id(5);
            6: prune_id(6);
            7: prune_id(7);
            8: prune_id(8);
            9: prune_id(9);
            10: prune_id(10);
            11: prune_id(11);
            12: prune_id(12);
            13: prune_id(13);
            14: prune_id(14);
            15: prune_id(15);
            16: prune_id(16);
            17: prune_id(17);
            18: prune_id(18);
            19: prune_id(19);
            20: prune_id(20);
            21: prune_id(21);
            22: prune_id(22);
            23: prune_id(23);
            24: prune_id(24);
            25: prune_id(25);
            26: prune_id(26);
            27: prune_id(27);
            28: prune_id(28);
            29: prune_id(29);
            30: prune_id(30);
            31: prune_id(31);
        }
        const default_action = prune_id(L2_XID_NONE);
        size = NETCOLL_MAX_PORTS;
    }

    /* Logical port p -> the child bits of ports 1 .. p - 1 (in_port_bit - 1): a constant table,
     * as a subtraction on the port bitmap would keep it in one container, which the bitmap's
     * PHV slicing does not allow (p4c-barefoot 1.2.5.16). */
    action ports_below(port_bitmap_t below) {
        md.coll.in_ports_below = below;
    }
    table ingress_ports_below {
        key = { md.coll.in_port : exact @name("port"); }
        actions = { ports_below; }
        const entries = {
            1: ports_below(0x00000000);
            2: ports_below(0x00000001);
            3: ports_below(0x00000003);
            4: ports_below(0x00000007);
            5: ports_below(0x0000000F);
            6: ports_below(0x0000001F);
            7: ports_below(0x0000003F);
            8: ports_below(0x0000007F);
            9: ports_below(0x000000FF);
            10: ports_below(0x000001FF);
            11: ports_below(0x000003FF);
            12: ports_below(0x000007FF);
            13: ports_below(0x00000FFF);
            14: ports_below(0x00001FFF);
            15: ports_below(0x00003FFF);
            16: ports_below(0x00007FFF);
            17: ports_below(0x0000FFFF);
            18: ports_below(0x0001FFFF);
            19: ports_below(0x0003FFFF);
            20: ports_below(0x0007FFFF);
            21: ports_below(0x000FFFFF);
            22: ports_below(0x001FFFFF);
            23: ports_below(0x003FFFFF);
            24: ports_below(0x007FFFFF);
            25: ports_below(0x00FFFFFF);
            26: ports_below(0x01FFFFFF);
            27: ports_below(0x03FFFFFF);
            28: ports_below(0x07FFFFFF);
            29: ports_below(0x0FFFFFFF);
            30: ports_below(0x1FFFFFFF);
            31: ports_below(0x3FFFFFFF);
        }
        const default_action = ports_below(0);
        size = NETCOLL_MAX_PORTS;
    }

    apply {
        /* in_port, in_port_bit and the commit and release flags come from the parser */
        bool steered = hdr.steer.isValid();
        bool resubmitted = ig_intr_md.resubmit_flag == 1;
        ingress_ports_below.apply();
        /* level2_exclusion_id = in_port for every packet, so that a multicast that prunes its
         * ingress port needs no table after its decision (the traffic manager reads the id
         * only for a multicast; one that prunes nothing resets it) */
        ingress_prune_id.apply();
        md.coll.frame_len = 0; /* TNA ingress has no packet length: the check is skipped */
        /* an if statement, not a conditional expression: Tofino's actions cannot test. The
         * parser zeroed parse_error (md = { ... }): writing 0 here as well cost Tofino 2 a
         * stage before the classification table. */
        if (ig_prsr_md.parser_err != 0) {
            md.coll.parse_error = 1;
        }
        /* Steered and resubmitted passes run in the state pipe by construction. */
        md.coll.arch_state_elsewhere = 0;
        if (!steered && !resubmitted && (hdr.port_md.flags & PORT_FLAG_STATE_PIPE) == 0) {
            md.coll.arch_state_elsewhere = 1;
        }

        column_lookup.apply(hdr.net, md.coll.counter_column); /* for rx_port_op */
        md.arrived_op = hdr.net.coll.op;
        md.arrived_src = hdr.net.coll.src_node;

        netcoll.apply(hdr.net, md.coll);
#ifndef NETCOLL_NO_REDUCTION
        agg_lanes.apply(hdr.net, md.coll); /* the reduction's lanes, last (tna/state.p4) */
#endif

        hdr.steer.setInvalid(); /* never leaves the switch */
        if (md.coll.state_op == STATE_NEXT_PASS) {
            /* the state is in the state pipe: steer the packet there. Counted by the pass
             * that decides, so every packet is counted once. */
            hdr.bridge.setValid();
            hdr.bridge.kind = BRIDGE_STEER;
            hdr.bridge.flags = 0;
            hdr.bridge.in_port = md.coll.in_port;
            hdr.bridge.in_port_bit = md.coll.in_port_bit;
            hdr.bridge.mcast_children = 0;
            hdr.bridge.generation = 0;
            ig_tm_md.ucast_egress_port = (PortId_t) hdr.port_md.steer_port;
        } else if (md.coll.arch_release_next == 1) {
            /* the instance's last RESULT leaves from a release pass that advances the released
             * epoch (tna/state.p4): the packet goes round again as it arrived but for the
             * aggregate in its lanes, counted there. Not resubmitted: that would drop the
             * aggregate, and a REDUCE's slot pass is a resubmitted one already. */
            hdr.net.coll.op = md.arrived_op;
            hdr.net.coll.src_node = md.arrived_src;
            hdr.bridge.setValid();
            hdr.bridge.kind = BRIDGE_STEER;
            hdr.bridge.flags = STEER_FLAG_RELEASE;
            hdr.bridge.in_port = md.coll.in_port;
            hdr.bridge.in_port_bit = md.coll.in_port_bit;
            hdr.bridge.mcast_children = 0;
            hdr.bridge.generation = md.coll.bar_generation;
            state_pipe_steer_port.apply(); /* a resubmitted pass has no port metadata */
        } else if (md.coll.arch_resubmit == 1) {
            /* a second pass finishes the state (tna/state.p4): the decision just taken is not
             * carried out, the packet is resubmitted as it arrived */
            hdr.resubmit.setValid();
            if (steered) {
                hdr.resubmit.flags = RESUBMIT_FLAG_STEERED;
            } else {
                hdr.resubmit.flags = 0;
            }
            hdr.resubmit.in_port = (bit<8>) md.coll.in_port;
            hdr.resubmit.commit_generation = md.coll.arch_commit_generation;
            hdr.resubmit.in_port_bit = md.coll.in_port_bit;
#if __TARGET_TOFINO__ != 1
            hdr.resubmit.tofino2_pad = 0;
#endif
            ig_dprsr_md.resubmit_type = RESUBMIT_TYPE_COMMIT;
        } else {
            /* one if/else on the decision, each field written once per path: a write that a
             * later table reads or overwrites costs a stage */
            if (md.coll.out_kind == OUT_DROP) {
                ig_dprsr_md.drop_ctl = 1;
            } else {
                hdr.bridge.setValid();
                hdr.bridge.in_port = md.coll.in_port;
                hdr.bridge.in_port_bit = md.coll.in_port_bit;
                hdr.bridge.mcast_children = md.coll.mcast_children;
                hdr.bridge.generation = 0;
                if (md.coll.out_kind != OUT_MCAST) {
                    /* a unicast or a reply (out_port = in_port): no_dev_port drops it */
                    hdr.bridge.kind = BRIDGE_FORWARD;
                    hdr.bridge.flags = 0;
                    dev_port_map.apply();
                } else {
                    /* kind, RID, the replica rules for egress and the pruning */
                    replica_rules.apply();
                    if (md.coll.filter_children == 0) {
                        ig_tm_md.mcast_grp_a = md.coll.mcast_grp;
                    } else if (md.coll.replication_group == 0) {
                        /* ChildReplication: no replication groups installed yet */
                        ig_dprsr_md.drop_ctl = 1;
                        empty_tree_drops.count(0); /* DROP_EMPTY_TREE */
                    } else {
                        ig_tm_md.mcast_grp_a = md.coll.replication_group;
                    }
                }
            }
            if (md.coll.in_port_bit != 0) {
                /* port_counter_index from the hash unit (see tna/state.p4), in a variable:
                 * p4c 1.2.5's function inliner (FunctionsInliner::inlineBefore) crashes
                 * (SIGSEGV) on a function call passed to an extern method in nested ifs */
                bit<32> rx_index = rx_index_hash.get({md.coll.in_port,
                    md.coll.counter_column[TNA_COUNTER_COLUMN_BITS - 1:0]});
                rx_port_op.count(rx_index);
            }
            if (md.coll.drop_reason != DROP_NONE) { /* NetcollIngress's verdict */
                drop_reasons.count((bit<32>) md.coll.drop_reason);
            }
        }
    }
}

control TnaIngressDeparser(packet_out pkt, inout tna_headers_t hdr, in tna_ingress_meta_t md,
                           in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Resubmit(RESUBMIT_TYPE_COMMIT) resubmit;
    CollDeparser() coll_deparser;

    apply {
        if (ig_dprsr_md.resubmit_type == RESUBMIT_TYPE_COMMIT) {
            resubmit.emit(hdr.resubmit);
        }
        pkt.emit(hdr.bridge);
        coll_deparser.apply(pkt, hdr.net);
    }
}

parser TnaEgressParser(packet_in pkt, out tna_headers_t hdr, out tna_egress_meta_t md,
                       out egress_intrinsic_metadata_t eg_intr_md) {
    CollParser() coll_parser;

    state start {
        md = { ... };
        pkt.extract(eg_intr_md);
        pkt.extract(hdr.bridge);
        coll_parser.apply(pkt, hdr.net);
        transition accept;
    }
}

control TnaEgress(inout tna_headers_t hdr, inout tna_egress_meta_t md,
                  in egress_intrinsic_metadata_t eg_intr_md,
                  in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                  inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                  inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) tx_index_hash;
    CounterColumn() column_lookup;
    Counter<bit<32>, bit<32>>(NETCOLL_PORT_COUNTERS, CounterType_t.PACKETS_AND_BYTES) tx_port_op;
    Counter<bit<32>, bit<32>>(NETCOLL_DROP_REASONS, CounterType_t.PACKETS_AND_BYTES)
        egress_drop_reasons;
#ifndef NETCOLL_NO_REDUCTION
    AggMask() agg_unmask; /* ingress masked every packet's lanes (tna/state.p4, AggLanes) */
#endif

    action set_logical_port(port_num_t port, port_bitmap_t port_bit) {
        md.egress_port = port;
        md.egress_port_bit = port_bit;
        md.egress_port_in_children = port_bit & hdr.bridge.mcast_children;
    }

    action not_a_netcoll_port() {
        md.egress_port = 0;
        md.egress_port_bit = 0;
        md.egress_port_in_children = 0;
    }

    /* Dev port -> logical port and its one-hot child bit (Tofino has no variable shift). */
    table egress_port_map {
        key = { eg_intr_md.egress_port : exact @name("dev_port"); }
        actions = { set_logical_port; not_a_netcoll_port; }
        default_action = not_a_netcoll_port();
        size = NETCOLL_MAX_PORTS;
    }

    apply {
#ifndef NETCOLL_NO_REDUCTION
        agg_unmask.apply(hdr.net);
#endif
        egress_port_map.apply();
        if (hdr.bridge.kind == BRIDGE_STEER) {
            hdr.steer.setValid();
            hdr.steer.in_port = hdr.bridge.in_port;
            hdr.steer.in_port_bit = hdr.bridge.in_port_bit;
            hdr.steer.flags = hdr.bridge.flags;
            hdr.steer.generation = hdr.bridge.generation;
        } else {
            bit<8> reason = DROP_NONE;
            if (hdr.bridge.kind == BRIDGE_REPLICA) {
                md.coll.in_port = hdr.bridge.in_port;
                md.coll.mcast_children = hdr.bridge.mcast_children;
                md.coll.filter_children = 0;
                if ((hdr.bridge.flags & BRIDGE_FLAG_FILTER_CHILDREN) != 0) {
                    md.coll.filter_children = 1;
                }
                md.coll.prune_ingress = 0;
                if ((hdr.bridge.flags & BRIDGE_FLAG_PRUNE_INGRESS) != 0) {
                    md.coll.prune_ingress = 1;
                }
                reason = replica_drop_reason(md.coll, md.egress_port, md.egress_port_in_children);
            }
            if (reason != DROP_NONE) {
                egress_drop_reasons.count((bit<32>) reason);
                eg_dprsr_md.drop_ctl = 1;
            } else if (md.egress_port_bit != 0) {
                bit<8> column;
                column_lookup.apply(hdr.net, column);
                bit<32> tx_index = tx_index_hash.get({md.egress_port,
                                                      column[TNA_COUNTER_COLUMN_BITS - 1:0]});
                tx_port_op.count(tx_index); /* port_counter_index: see rx_index */
            }
        }
        hdr.bridge.setInvalid();
    }
}

control TnaEgressDeparser(packet_out pkt, inout tna_headers_t hdr, in tna_egress_meta_t md,
                          in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    CollDeparser() coll_deparser;

    apply {
        pkt.emit(hdr.steer);
        coll_deparser.apply(pkt, hdr.net);
    }
}

Pipeline(TnaIngressParser(), TnaIngress(), TnaIngressDeparser(), TnaEgressParser(), TnaEgress(),
         TnaEgressDeparser()) pipe;

Switch(pipe) main;
