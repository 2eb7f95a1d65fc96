/* netcoll: port facts, classification and unicast forwarding by destination node id. */
#ifndef NETCOLL_FORWARDING_P4
#define NETCOLL_FORWARDING_P4

#include "constants.p4"
#include "headers.p4"

/* Which counter column a packet belongs to: its op, or IPv4, or "other". */
bit<8> counter_column(in headers_t hdr) {
    bit<8> column = COLUMN_OTHER;
    if (hdr.coll.isValid()) {
        column = hdr.coll.op;
        if (hdr.coll.op == 0 || hdr.coll.op > OP_MAX) {
            column = COLUMN_BAD_OP;
        }
    } else if (hdr.ipv4.isValid()) {
        column = COLUMN_IPV4;
    }
    return column;
}

/* Index of a per-(port, column) counter: rx_port_op and tx_port_op of every architecture. */
bit<32> port_counter_index(in port_num_t port, in bit<8> column) {
    return (bit<32>) port * NETCOLL_COUNTER_COLUMNS + (bit<32>) column;
}

/* Frame bytes a well-formed collective packet needs: headers plus its declared payload. */
bit<32> coll_needed_bytes(in headers_t hdr) {
    bit<16> mp_bytes = hdr.mp.isValid() ? MP_BODY_BYTES : 16w0;
    /* 32-bit sum: a huge payload_len must not wrap around to a small requirement */
    return (bit<32>) (ETHERNET_BYTES + COLL_HEADER_BYTES + mp_bytes)
        + (bit<32>) hdr.coll.payload_len;
}

control Classify(inout headers_t hdr, inout coll_meta_t meta) {
    action set_port(bit<8> role, node_id_t node) {
        meta.port_role = role;
        meta.port_node = node;
#ifdef NETCOLL_CLASSIFY_TABLE
        meta.arch_src_diff = hdr.coll.src_node ^ node;
        meta.arch_ipv4_src_diff = hdr.ipv4.src_addr[15:0] ^ node;
#endif
    }

    /* Unconfigured ports are host ports with no node: they can neither inject mini packets nor
     * pass the source check. */
    table port_info {
        key = { meta.in_port : exact @name("port"); }
        actions = { set_port; }
        default_action = set_port(ROLE_HOST, 0);
        size = NETCOLL_MAX_PORTS;
    }

    action set_identity(node_id_t node) {
        meta.my_node = node;
#ifdef NETCOLL_CLASSIFY_TABLE
        meta.arch_dst_diff = hdr.coll.dst_node ^ node;
#endif
    }

    table switch_identity {
        actions = { set_identity; }
        default_action = set_identity(0);
        size = 1;
    }

    action reject(bit<8> reason) {
        meta.class = CLASS_NONE;
        meta.drop_reason = reason;
    }

#ifdef NETCOLL_CLASSIFY_TABLE
    /* The tests below as one constant ternary table, first entry first (a shim without frame
     * lengths only: frame_len 0, so the length test never applies). Each branch of the if
     * statements was a table on Tofino, twenty in all. The entries were generated from, and
     * checked against, the if statements for every combination of their inputs; keys a test
     * does not read are _ (0 .. 255 for the op's range). The my_node 0 entries come before
     * the dst_diff 0 ones: addressed_to_me needs my_node != 0. */
    action classify_collective(bit<8> class_of) {
        meta.class = class_of;
        meta.route_key = hdr.coll.dst_node;
    }
    action reject_collective(bit<8> reason) {
        meta.class = CLASS_NONE;
        meta.drop_reason = reason;
        meta.route_key = hdr.coll.dst_node;
    }
    /* a barrier packet: its state access asked for here (NetcollIngress's range check, one
     * stage earlier), or its communicator out of range */
    action classify_barrier() {
        meta.class = CLASS_BARRIER;
        meta.route_key = hdr.coll.dst_node;
        meta.state_op = STATE_BARRIER_EVENT;
        meta.state_slot = hdr.coll.comm_id;
        meta.barrier_state_asked = 1;
    }
    action barrier_out_of_range() {
        meta.class = CLASS_BARRIER;
        meta.route_key = hdr.coll.dst_node;
        meta.drop_reason = DROP_COMM_RANGE;
    }
    action route_ipv4() {
        meta.class = CLASS_ROUTE;
        meta.route_key = hdr.ipv4.dst_addr[15:0];
    }
    /* the last communicator slot, for the table's range */
    const comm_id_t COMM_SLOT_LAST = NETCOLL_COMM_SLOTS - 1;

    table classification {
        key = {
            meta.parse_error : ternary @name("parse_error");
            hdr.coll.isValid() : ternary @name("coll_valid");
            hdr.coll.version : ternary @name("version");
            hdr.coll.op : range @name("op");
            meta.port_role : ternary @name("port_role");
            meta.arch_src_diff : ternary @name("src_diff");
            meta.my_node : ternary @name("my_node");
            meta.arch_dst_diff : ternary @name("dst_diff");
            hdr.coll.payload_len : ternary @name("payload_len");
            hdr.coll.flags : ternary @name("flags");
            hdr.ipv4.isValid() : ternary @name("ipv4_valid");
            hdr.ipv4.dst_addr[31:16] : ternary @name("ipv4_prefix");
            meta.arch_ipv4_src_diff : ternary @name("ipv4_src_diff");
            hdr.coll.comm_id : range @name("comm_id");
        }
        actions = {
            classify_collective;
            classify_barrier;
            barrier_out_of_range;
            reject_collective;
            route_ipv4;
            reject;
        }
        const entries = {
            (1, _, _, 0 .. 255, _, _, _, _, _, _, _, _, _, _):
                reject(DROP_MALFORMED);
            (0, true, COLL_VERSION, 0 .. 0, _, _, _, _, _, _, _, _, _, _):
                reject_collective(DROP_BAD_OP);
            (0, true, COLL_VERSION, 14 .. 255, _, _, _, _, _, _, _, _, _, _):
                reject_collective(DROP_BAD_OP);
            (0, true, COLL_VERSION, 7 .. 8, ROLE_HOST, _, _, _, _, _, _, _, _, _):
                reject_collective(DROP_MP_FROM_HOST);
            (0, true, COLL_VERSION, 7 .. 8, _, _, 0, _, _, _, _, _, _, _):
                classify_collective(CLASS_ROUTE);
            (0, true, COLL_VERSION, 7 .. 7, _, _, _, 0, _, _, _, _, _, _):
                classify_collective(CLASS_LOCAL);
            (0, true, COLL_VERSION, 8 .. 8, _, _, _, 0, _, _, _, _, _, _):
                reject_collective(DROP_MP_BAD_KIND);
            (0, true, COLL_VERSION, 7 .. 8, _, _, _, _, _, _, _, _, _, _):
                classify_collective(CLASS_ROUTE);
            (0, true, COLL_VERSION, 1 .. 1, ROLE_HOST, 0, _, _, _, _, _, _, _, _):
                classify_collective(CLASS_MCAST);
            (0, true, COLL_VERSION, 5 .. 6, ROLE_HOST, 0, _, _, _, _, _, _, _, 0 .. COMM_SLOT_LAST):
                classify_barrier();
            (0, true, COLL_VERSION, 5 .. 6, ROLE_HOST, 0, _, _, _, _, _, _, _, _):
                barrier_out_of_range();
            (0, true, COLL_VERSION, 12 .. 13, ROLE_HOST, 0, _, _, AGG_PAYLOAD_BYTES, _, _, _, _, _):
                classify_collective(CLASS_AGG);
            (0, true, COLL_VERSION, 12 .. 13, ROLE_HOST, 0, _, _, _, _, _, _, _, _):
                reject_collective(DROP_MALFORMED);
            (0, true, COLL_VERSION, 3 .. 3, ROLE_HOST, 0,
              _, _, _, FLAG_MERGE &&& FLAG_MERGE, _, _, _, _):
                classify_collective(CLASS_ACK_MERGE);
            (0, true, COLL_VERSION, 9 .. 9, ROLE_HOST, 0, 0, _, _, _, _, _, _, _):
                classify_collective(CLASS_ROUTE);
            (0, true, COLL_VERSION, 9 .. 9, ROLE_HOST, 0, _, 0, _, _, _, _, _, _):
                classify_collective(CLASS_LOCAL);
            (0, true, COLL_VERSION, 1 .. 13, ROLE_HOST, 0, _, _, _, _, _, _, _, _):
                classify_collective(CLASS_ROUTE);
            (0, true, COLL_VERSION, 0 .. 255, ROLE_HOST, _, _, _, _, _, _, _, _, _):
                reject_collective(DROP_SRC_SPOOF);
            (0, true, COLL_VERSION, 1 .. 1, _, _, _, _, _, _, _, _, _, _):
                classify_collective(CLASS_MCAST);
            (0, true, COLL_VERSION, 5 .. 6, _, _, _, _, _, _, _, _, _, 0 .. COMM_SLOT_LAST):
                classify_barrier();
            (0, true, COLL_VERSION, 5 .. 6, _, _, _, _, _, _, _, _, _, _):
                barrier_out_of_range();
            (0, true, COLL_VERSION, 12 .. 13, _, _, _, _, AGG_PAYLOAD_BYTES, _, _, _, _, _):
                classify_collective(CLASS_AGG);
            (0, true, COLL_VERSION, 12 .. 13, _, _, _, _, _, _, _, _, _, _):
                reject_collective(DROP_MALFORMED);
            (0, true, COLL_VERSION, 3 .. 3, _, _, _, _, _, FLAG_MERGE &&& FLAG_MERGE, _, _, _, _):
                classify_collective(CLASS_ACK_MERGE);
            (0, true, COLL_VERSION, 9 .. 9, _, _, 0, _, _, _, _, _, _, _):
                classify_collective(CLASS_ROUTE);
            (0, true, COLL_VERSION, 9 .. 9, _, _, _, 0, _, _, _, _, _, _):
                classify_collective(CLASS_LOCAL);
            (0, true, COLL_VERSION, 1 .. 13, _, _, _, _, _, _, _, _, _, _):
                classify_collective(CLASS_ROUTE);
            (0, true, _, 0 .. 255, _, _, _, _, _, _, _, _, _, _):
                reject_collective(DROP_MALFORMED);
            (0, false, _, 0 .. 255, ROLE_HOST, _, _, _, _, _, true, IPV4_HOST_PREFIX, 0, _):
                route_ipv4();
            (0, false, _, 0 .. 255, ROLE_HOST, _, _, _, _, _, true, IPV4_HOST_PREFIX, _, _):
                reject(DROP_SRC_SPOOF);
            (0, false, _, 0 .. 255, _, _, _, _, _, _, true, IPV4_HOST_PREFIX, _, _):
                route_ipv4();
        }
        const default_action = reject(DROP_NON_COLLECTIVE);
        size = 32;
    }
#endif

    apply {
        meta.class = CLASS_NONE;
        meta.out_kind = OUT_DROP;
        /* a reply's port, until a decision names another: one field for an architecture's
         * port lookup, whichever way the packet leaves */
        meta.out_port = meta.in_port;
        meta.drop_reason = DROP_NONE;
#ifndef NETCOLL_SHIM_COUNTER_COLUMN /* else the shim looks it up (tna/netcoll.p4) */
        meta.counter_column = counter_column(hdr);
#endif
        if (meta.in_port_bit == 0) {
            reject(DROP_PORT_RANGE);
            return;
        }
        port_info.apply();
        switch_identity.apply();
#ifdef NETCOLL_CLASSIFY_TABLE
        classification.apply();
#else
        bool is_host_port = meta.port_role == ROLE_HOST;
        bool addressed_to_me = meta.my_node != 0 && hdr.coll.dst_node == meta.my_node;

        if (meta.parse_error == 1) {
            reject(DROP_MALFORMED);
        } else if (hdr.coll.isValid()) {
            if (hdr.coll.version != COLL_VERSION) {
                reject(DROP_MALFORMED);
            } else if (hdr.coll.op == 0 || hdr.coll.op > OP_MAX) {
                reject(DROP_BAD_OP);
            } else if (meta.frame_len != 0 && meta.frame_len < coll_needed_bytes(hdr)) {
                reject(DROP_MALFORMED);
            } else if (hdr.coll.op == OP_MP || hdr.coll.op == OP_MP_REPLY) {
                /* Membership only ever comes from the management side of the network. */
                if (is_host_port) {
                    reject(DROP_MP_FROM_HOST);
                } else if (addressed_to_me) {
                    if (hdr.coll.op == OP_MP) {
                        meta.class = CLASS_LOCAL;
                    } else {
                        reject(DROP_MP_BAD_KIND);
                    }
                } else {
                    meta.class = CLASS_ROUTE;
                }
            } else if (is_host_port && hdr.coll.src_node != meta.port_node) {
                reject(DROP_SRC_SPOOF);
            } else if (hdr.coll.op == OP_MCAST) {
                meta.class = CLASS_MCAST;
            } else if (hdr.coll.op == OP_ARRIVE || hdr.coll.op == OP_RELEASE) {
                meta.class = CLASS_BARRIER;
            } else if (hdr.coll.op == OP_REDUCE || hdr.coll.op == OP_RESULT) {
                /* the payload is exactly the lanes, so the lanes are all there is to add */
                if (hdr.coll.payload_len != AGG_PAYLOAD_BYTES) {
                    reject(DROP_MALFORMED);
                } else {
                    meta.class = CLASS_AGG;
                }
            } else if (hdr.coll.op == OP_ACK && (hdr.coll.flags & FLAG_MERGE) != 0) {
                meta.class = CLASS_ACK_MERGE; /* never routed: merged up the tree */
            } else if (hdr.coll.op == OP_PING && addressed_to_me) {
                meta.class = CLASS_LOCAL;
            } else {
                meta.class = CLASS_ROUTE;
            }
            meta.route_key = hdr.coll.dst_node;
        } else if (hdr.ipv4.isValid()) {
            if (hdr.ipv4.dst_addr[31:16] != IPV4_HOST_PREFIX) {
                reject(DROP_NON_COLLECTIVE);
            } else if (is_host_port && hdr.ipv4.src_addr[15:0] != meta.port_node) {
                reject(DROP_SRC_SPOOF);
            } else {
                meta.class = CLASS_ROUTE;
                meta.route_key = hdr.ipv4.dst_addr[15:0];
            }
        } else {
            reject(DROP_NON_COLLECTIVE);
        }
#endif
    }
}

control Route(inout coll_meta_t meta) {
    action forward(port_num_t port) {
        meta.out_kind = OUT_UNICAST;
        meta.out_port = port;
    }

    action no_route() {
        meta.out_kind = OUT_DROP;
        meta.drop_reason = DROP_NO_ROUTE;
    }

    table node_route {
        key = { meta.route_key : exact @name("node"); }
        actions = { forward; no_route; }
        default_action = no_route();
        size = NETCOLL_NODE_ROUTES;
    }

    apply {
        node_route.apply();
    }
}

#endif /* NETCOLL_FORWARDING_P4 */
