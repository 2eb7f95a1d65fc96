/* netcoll: header emission order, shared by every architecture's deparser. */
#ifndef NETCOLL_DEPARSER_P4
#define NETCOLL_DEPARSER_P4

#include "headers.p4"

control CollDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.coll);
        pkt.emit(hdr.mp);
        pkt.emit(hdr.agg);
    }
}

#endif /* NETCOLL_DEPARSER_P4 */
