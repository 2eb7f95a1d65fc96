/* netcoll for BMv2 simple_switch_grpc (v1model).
 *
 * The thin v1model shim: it converts ports and intrinsic metadata into coll_meta_t, runs the
 * shared logic of common/, carries out its decision and counts. Build: make build.
 */
#include <core.p4>
#include <v1model.p4>

#include "../common/constants.p4"
#include "../common/headers.p4"
#include "../common/parser.p4"
#include "../common/deparser.p4"
#include "../common/egress.p4"
#include "state.p4"
#include "../common/ingress.p4"

/* simple_switch's instance_type of multicast replicas */
const bit<32> PKT_INSTANCE_TYPE_REPLICATION = 5;

parser V1Parser(packet_in pkt, out headers_t hdr, inout coll_meta_t meta,
                inout standard_metadata_t sm) {
    CollParser() coll_parser;

    state start {
        coll_parser.apply(pkt, hdr);
        transition accept;
    }
}

control V1VerifyChecksum(inout headers_t hdr, inout coll_meta_t meta) {
    apply { }
}

control V1Ingress(inout headers_t hdr, inout coll_meta_t meta, inout standard_metadata_t sm) {
    counter(NETCOLL_PORT_COUNTERS, CounterType.packets_and_bytes) rx_port_op;
    counter(NETCOLL_DROP_REASONS, CounterType.packets_and_bytes) drop_reasons;
    NetcollIngress() netcoll;

    apply {
        meta.in_port = (port_num_t) sm.ingress_port;
        meta.in_port_bit = port_bit(meta.in_port);
        meta.in_ports_below = meta.in_port_bit - 1;
        meta.frame_len = sm.packet_length;
        meta.parse_error = sm.parser_error == error.NoError ? 1w0 : 1w1;

        netcoll.apply(hdr, meta);

        if (meta.in_port_bit != 0) {
            rx_port_op.count(port_counter_index(meta.in_port, meta.counter_column));
        }
        if (meta.drop_reason != DROP_NONE) {
            drop_reasons.count((bit<32>) meta.drop_reason);
        }
        if (meta.out_kind == OUT_UNICAST) {
            sm.egress_spec = (bit<9>) meta.out_port;
        } else if (meta.out_kind == OUT_REPLY) {
            sm.egress_spec = sm.ingress_port;
        } else if (meta.out_kind == OUT_MCAST) {
            sm.mcast_grp = meta.mcast_grp;
        } else {
            mark_to_drop(sm);
        }
    }
}

control V1Egress(inout headers_t hdr, inout coll_meta_t meta, inout standard_metadata_t sm) {
    counter(NETCOLL_PORT_COUNTERS, CounterType.packets_and_bytes) tx_port_op;
    counter(NETCOLL_DROP_REASONS, CounterType.packets_and_bytes) egress_drop_reasons;

    apply {
        port_num_t port = (port_num_t) sm.egress_port;
        port_bitmap_t egress_bit = port_bit(port);
        bit<8> reason = DROP_NONE;
        if (sm.instance_type == PKT_INSTANCE_TYPE_REPLICATION) {
            reason = replica_drop_reason(meta, port, meta.mcast_children & egress_bit);
        }
        if (reason != DROP_NONE) {
            egress_drop_reasons.count((bit<32>) reason);
            mark_to_drop(sm);
        } else if (egress_bit != 0) {
            tx_port_op.count(port_counter_index(port, counter_column(hdr)));
        }
    }
}

control V1ComputeChecksum(inout headers_t hdr, inout coll_meta_t meta) {
    apply { }
}

control V1Deparser(packet_out pkt, in headers_t hdr) {
    CollDeparser() coll_deparser;

    apply {
        coll_deparser.apply(pkt, hdr);
    }
}

V1Switch(V1Parser(), V1VerifyChecksum(), V1Ingress(), V1Egress(), V1ComputeChecksum(),
         V1Deparser()) main;
