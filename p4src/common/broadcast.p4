/* netcoll: broadcast replication along the tree of (communicator, root, tree).
 *
 * Each binding comes from P4Runtime. Its action says where the replication comes from:
 *  - replicate_static: parent port and a per-tree multicast group, both from the control plane;
 *  - replicate_from_slot: parent port and child bitmap from a membership slot that mini packets
 *    write (TreeState, in the architecture shim).
 * The binding decides, so when both paths describe one (communicator, root) the table entry
 * wins: a static binding never consults the slot.
 */
#ifndef NETCOLL_BROADCAST_P4
#define NETCOLL_BROADCAST_P4

#include "constants.p4"
#include "headers.p4"

control BroadcastLookup(in headers_t hdr, inout coll_meta_t meta) {
    action replicate_static(port_num_t parent_port, bit<16> group) {
        meta.tree_source = TREE_SOURCE_STATIC;
        meta.tree_parent = parent_port;
        meta.mcast_grp = group;
    }

    action replicate_from_slot(bit<16> slot) {
        meta.tree_source = TREE_SOURCE_SLOT;
        meta.tree_slot = slot;
        meta.state_op = STATE_TREE_READ; /* TreeState runs only if the checks below pass */
        meta.state_slot = slot;
    }

    action unknown_tree() {
        meta.tree_source = TREE_SOURCE_NONE;
    }

    table bcast_tree {
        key = {
            hdr.coll.comm_id : exact @name("comm_id");
            hdr.coll.root_node : exact @name("root_node");
            hdr.coll.tree : exact @name("tree");
        }
        actions = { replicate_static; replicate_from_slot; unknown_tree; }
        default_action = unknown_tree();
        size = NETCOLL_BCAST_TREES;
    }

    apply {
        bcast_tree.apply();
        if (meta.tree_source == TREE_SOURCE_NONE) {
            meta.drop_reason = DROP_UNKNOWN_TREE;
        } else if (meta.tree_source == TREE_SOURCE_SLOT) {
            if (meta.tree_slot >= NETCOLL_TREE_SLOTS) {
                /* a binding to a slot the program does not have: never index a register */
                meta.drop_reason = DROP_UNKNOWN_TREE;
            }
        }
    }
}

/* After TreeState filled tree_parent/tree_children for slot bindings. */
control BroadcastDecide(in headers_t hdr, inout coll_meta_t meta) {
    apply {
        /* in two conditions: a Tofino gateway reads at most 4 bytes and 12 bits */
        bool slot_unwritten = false;
        if (meta.tree_source == TREE_SOURCE_SLOT && meta.tree_parent == 0) {
            if (meta.tree_children == 0) {
                slot_unwritten = true;
            }
        }
        if (slot_unwritten) {
            meta.drop_reason = DROP_UNKNOWN_TREE; /* bound, but no mini packet wrote it yet */
        } else if (meta.in_port != meta.tree_parent) {
            meta.drop_reason = DROP_RPF; /* only the tree's parent port feeds this tree */
        } else if (meta.tree_source == TREE_SOURCE_SLOT) {
            if (meta.tree_children == 0) {
                meta.drop_reason = DROP_EMPTY_TREE;
            } else {
                meta.out_kind = OUT_MCAST;
                meta.mcast_children = meta.tree_children;
                meta.filter_children = 1;
                meta.prune_ingress = 1;
            }
        } else if (meta.mcast_grp == 0) {
            meta.drop_reason = DROP_EMPTY_TREE; /* a leaf of this tree: nothing to copy to */
        } else {
            meta.out_kind = OUT_MCAST;
            meta.prune_ingress = 1;
        }
    }
}

/* Replication from a child bitmap (slot trees, barrier releases) picks its group here.
 * One group per port subset (group = base + child bitmap) is v1model's alternative to the
 * all-ports group filtered in egress; an architecture that defines NETCOLL_NO_SUBSET_GROUPS
 * has only the all-ports group. Tofino does (its control plane refuses the subset layout,
 * controller/tofino/bfrt.py): adding the low half of a 32-bit bitmap to a 16-bit group id
 * splits every port bitmap the program moves into 16-bit PHV slices, and PHV allocation then
 * fails (p4c-barefoot 1.2.5.16). */
control ChildReplication(inout coll_meta_t meta) {
#ifndef NETCOLL_NO_SUBSET_GROUPS
    action subset_groups(bit<16> base) {
        meta.replication_mode = REPLICATION_SUBSET_GROUPS;
        meta.replication_group = base;
    }
#endif

    action all_ports_group(bit<16> group) {
        meta.replication_mode = REPLICATION_ALL_PORTS;
        meta.replication_group = group;
    }

    table mp_replication {
#ifndef NETCOLL_NO_SUBSET_GROUPS
        actions = { subset_groups; all_ports_group; }
#else
        actions = { all_ports_group; }
#endif
        default_action = all_ports_group(0);
        size = 1;
    }

    /* The table for every packet (it has no key): looked up before the decision, it costs no
     * stage after it. */
    apply {
        mp_replication.apply();
#ifdef NETCOLL_SHIM_CHECKS_GROUP
        /* the shim checks replication_group where it carries out the multicast: here, its
         * out_kind rewritten would be tested again after, a Tofino stage (tna/netcoll.p4) */
#else
        if (meta.out_kind != OUT_MCAST || meta.filter_children != 1) {
            return; /* not a replication from a child bitmap */
        }
        if (meta.replication_group == 0) {
            /* the control plane has not installed replication groups yet */
            meta.out_kind = OUT_DROP;
            meta.drop_reason = DROP_EMPTY_TREE;
#ifndef NETCOLL_NO_SUBSET_GROUPS
        } else if (meta.replication_mode == REPLICATION_SUBSET_GROUPS) {
            meta.mcast_grp = meta.replication_group + (bit<16>) meta.mcast_children;
#endif
        } else {
            meta.mcast_grp = meta.replication_group;
        }
#endif
    }
}

#endif /* NETCOLL_BROADCAST_P4 */
