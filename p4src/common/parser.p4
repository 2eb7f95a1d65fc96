/* netcoll: the parser states every architecture shares, as a sub-parser the shims call after
 * their own intrinsic metadata. */
#ifndef NETCOLL_PARSER_P4
#define NETCOLL_PARSER_P4

#include "constants.p4"
#include "headers.p4"

parser CollParser(packet_in pkt, out headers_t hdr) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_COLL: parse_coll;
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_coll {
        pkt.extract(hdr.coll);
        transition select(hdr.coll.op) {
            OP_MP: parse_mp;
            OP_MP_REPLY: parse_mp;
            OP_REDUCE: parse_agg;
            OP_RESULT: parse_agg;
            default: accept;
        }
    }

    state parse_agg {
        pkt.extract(hdr.agg);
        transition accept;
    }

    state parse_mp {
        pkt.extract(hdr.mp);
        transition accept;
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition accept;
    }
}

#endif /* NETCOLL_PARSER_P4 */
