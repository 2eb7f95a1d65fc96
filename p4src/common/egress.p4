/* netcoll: what every replica must pass on its way out. */
#ifndef NETCOLL_EGRESS_P4
#define NETCOLL_EGRESS_P4

#include "constants.p4"
#include "headers.p4"

/* Replicas never go back out of their ingress port (unicast replies may), and replicas of the
 * all-ports group leave only by ports in the child bitmap. The caller passes
 * mcast_children & (the egress port's bit), computed in an action: a Tofino gateway tests a
 * field against a constant, not two fields masked together. */
bit<8> replica_drop_reason(in coll_meta_t meta, in port_num_t egress_port,
                           in port_bitmap_t egress_port_in_children) {
    bit<8> reason = DROP_NONE;
    if (meta.prune_ingress == 1 && egress_port == meta.in_port) {
        reason = DROP_PRUNED;
    } else if (meta.filter_children == 1 && egress_port_in_children == 0) {
        reason = DROP_FILTERED;
    }
    return reason;
}

#endif /* NETCOLL_EGRESS_P4 */
