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

    apply {
        meta.class = CLASS_NONE;
        meta.out_kind = OUT_DROP;
        /* a reply's port, until a decision names another: one field for an architecture's
         * port lookup, whichever way the packet leaves */
        meta.out_port = meta.in_port;
        meta.drop_reason = DROP_NONE;
        meta.counter_column = counter_column(hdr);
        if (meta.in_port_bit == 0) {
            reject(DROP_PORT_RANGE);
            return;
        }
        port_info.apply();
        switch_identity.apply();
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
