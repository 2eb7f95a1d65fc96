/* netcoll: barrier counting across switches.
 *
 * Per communicator slot (slot = communicator id) the switch keeps its configuration (child
 * mask, parent port, generation: written by mini packets), the last released epoch, and
 * NETCOLL_BARRIER_WINDOW cells of {epoch, generation | arrival bitmap}, one per open epoch.
 * The architecture shim owns the registers (BarrierState) and calls the functions below, so
 * every architecture takes the same decisions; docs/protocol.md has the state machine.
 */
#ifndef NETCOLL_BARRIER_P4
#define NETCOLL_BARRIER_P4

#include "constants.p4"
#include "headers.p4"

/* Given ahead = epoch - released: is epoch - 1 after released (a switch asked about epoch
 * missed the RELEASE of the epoch before)? epoch_distance_after(ahead - 1), as ranges. */
bool barrier_missed_previous_release(in epoch_t ahead) {
    /* equalities and a sign-bit test: a gateway's range match covers 12 bits, not 16 */
    return ahead != 0 && ahead != 1 && (ahead < 0x8000 || ahead == 0x8000);
}

/* RFC 1982 modulo 2^16, given distance = a - b: is epoch a after epoch b? The caller subtracts
 * in an action (meta.bar_ahead is the packet's epoch - bar_released): a Tofino gateway tests a
 * field against constants, it cannot subtract. */
bool epoch_distance_after(in epoch_t distance) {
    return distance != 0 && distance < 0x8000;
}

bit<32> barrier_cell_index(in comm_id_t comm, in epoch_t epoch) {
    return (bit<32>) comm * NETCOLL_BARRIER_WINDOW
        + (bit<32>) (epoch & (NETCOLL_BARRIER_WINDOW - 1));
}

/* A cell belongs to one epoch of one configuration generation. */
bit<32> barrier_cell_tag(in epoch_t epoch, in bit<16> generation) {
    return epoch ++ generation;
}

/* The arrivals a cell holds for `tag`: a cell left by another epoch or generation is empty.
 * Half-wise (tag half, bitmap half) so that an architecture keeping the two halves of a cell in
 * one dual-width register (Tofino's RegisterAction) can call it on each half. */
port_bitmap_t barrier_arrivals_for(in bit<32> cell_tag, in port_bitmap_t cell_arrivals,
                                   in bit<32> tag) {
    return cell_tag == tag ? cell_arrivals : 32w0;
}

/* The bitmap half after recording one child's arrival under `tag` (the tag half becomes `tag`). */
port_bitmap_t barrier_arrivals_merge(in bit<32> cell_tag, in port_bitmap_t cell_arrivals,
                                     in bit<32> tag, in port_bitmap_t child) {
    return barrier_arrivals_for(cell_tag, cell_arrivals, tag) | child;
}

/* The same on a packed 64-bit cell: tag in [63:32], bitmap in [31:0]. */
barrier_cell_t barrier_cell_merge(in barrier_cell_t cell, in bit<32> tag, in port_bitmap_t child) {
    return tag ++ barrier_arrivals_merge(cell[63:32], cell[31:0], tag, child);
}

port_bitmap_t barrier_cell_arrivals(in barrier_cell_t cell, in bit<32> tag) {
    return barrier_arrivals_for(cell[63:32], cell[31:0], tag);
}

/* Is the epoch more than the window ahead of released, given ahead = epoch - released
 * (meta.bar_ahead)? ahead > window, written as tests a Tofino gateway holds (an order of a
 * 16-bit field is more than it can: its range match covers 12 bits): ahead >= window, with
 * the window a power of two, is a masked test, and ahead != window an equality. Computing
 * min(ahead, window + 1) in an action to test it for equality cost Tofino a stage. */
/* ahead & this != 0: ahead >= the window (a power of two) */
const epoch_t BARRIER_WINDOW_FLOOR_MASK = 16w0xFFFF ^ (NETCOLL_BARRIER_WINDOW - 1);

bool beyond_window(in epoch_t ahead) {
    return (ahead & BARRIER_WINDOW_FLOOR_MASK) != 0
        && ahead != NETCOLL_BARRIER_WINDOW;
}

/* What to do with an ARRIVE or RELEASE, from the slot's configuration and released epoch.
 * meta.bar_verdict is BARRIER_COUNT, BARRIER_ANSWER_RELEASE or BARRIER_ADVANCE; otherwise
 * meta.drop_reason says why the packet is dropped. The caller computes, in actions,
 * meta.in_port_match = child mask & in_port_bit and meta.bar_ahead = epoch - released.
 * A control, not a function with out parameters: p4c copies a function's outputs out through
 * temporaries, which costs Tofino a stage. */
control BarrierClassify(in headers_t hdr, inout coll_meta_t meta) {
    /* Each outcome sets both fields, each written once per path: a default written first and
     * overwritten after costs Tofino a stage. The caller applies this with drop_reason
     * DROP_NONE and bar_verdict 0. */
    action verdict(bit<8> barrier_verdict) {
        meta.bar_verdict = barrier_verdict;
        meta.drop_reason = DROP_NONE;
    }
    action refuse(bit<8> reason) {
        meta.bar_verdict = 0;
        meta.drop_reason = reason;
    }

    apply {
        if (meta.bar_child_mask == 0) {
            refuse(DROP_BARRIER_UNCONFIGURED);
        } else if (hdr.coll.op == OP_ARRIVE) {
            if (meta.in_port_match == 0) {
                refuse(DROP_NOT_CHILD);
            } else if (!epoch_distance_after(meta.bar_ahead)) {
                verdict(BARRIER_ANSWER_RELEASE); /* late or retransmitted ARRIVE */
            } else if ((meta.bar_ahead & BARRIER_WINDOW_FLOOR_MASK) == 0) {
                verdict(BARRIER_COUNT); /* beyond_window, one test per if */
            } else if (meta.bar_ahead == NETCOLL_BARRIER_WINDOW) {
                verdict(BARRIER_COUNT);
            } else {
                refuse(DROP_OUT_OF_WINDOW);
            }
        } else if (hdr.coll.op != OP_RELEASE || meta.bar_parent == 0) {
            /* only the slot's parent may send a RELEASE (configured slot, not the root, from the
             * parent port), one test at a time: a Tofino gateway reads at most 4 bytes of
             * fields. Only such a RELEASE advances the released epoch: an architecture that
             * picks the released register's single access before classifying makes the same
             * tests. */
            refuse(DROP_NOT_PARENT);
        } else if (meta.in_port != meta.bar_parent) {
            refuse(DROP_NOT_PARENT);
        } else if (!epoch_distance_after(meta.bar_ahead)) {
            refuse(DROP_STALE_RELEASE);
        } else {
            verdict(BARRIER_ADVANCE);
        }
    }
}

/* After BarrierState: turn the verdict into a packet to send.
 *
 * REPLY_NOW on an ARRIVE (issue 33; docs/protocol.md, Barrier repairs): a host port gets its
 * ARRIVE echoed once recorded (dst_node names the host), and a retransmitted ARRIVE that
 * finds the cell incomplete *asks* the children still missing, by the same ARRIVE sent down:
 * a host learns its switch released the epoch before, a switch that missed that RELEASE
 * takes it, one whose cell is complete sends its ARRIVE up again and one whose cell is not
 * asks its own missing children. So one rank's resend repairs whatever the barrier lost
 * between switches, however many ranks wait. */
control BarrierDecide(inout headers_t hdr, inout coll_meta_t meta) {
    /* The ports a repair asks, in missing_after (the barrier has done with it: Tofino's PHV
     * has few 32-bit containers): the children not recorded yet, when the slot released the
     * epoch before (a blocking barrier's only open one). In actions, set once: every write of
     * a field read after it costs Tofino a stage. */
#ifndef NETCOLL_SHIM_COMPUTES_ASKED
    action compute_asked() {
        meta.missing_after = meta.bar_child_mask & ~meta.bar_arrived;
    }
    action ask_nobody() {
        meta.missing_after = 0;
    }
#endif
    action multicast_to(port_bitmap_t ports) {
        meta.out_kind = OUT_MCAST;
        meta.mcast_children = ports;
        meta.filter_children = 1;
    }
    /* (re)send one ARRIVE upward */
    action send_up() {
        hdr.coll.src_node = meta.my_node;
        meta.out_kind = OUT_UNICAST;
        meta.out_port = meta.bar_parent;
    }

    apply {
        if (meta.drop_reason != DROP_NONE) {
            return;
        }
        bool repairs = (hdr.coll.flags & FLAG_REPLY_NOW) != 0;
        bool resent = (hdr.coll.flags & FLAG_RETRANSMIT) != 0;
        /* a host's ARRIVE is echoed to its port, in_port_bit (never 0 here: Classify drops
         * packets from ports without a bit) */
        bool from_host = meta.port_role == ROLE_HOST;
#ifndef NETCOLL_SHIM_COMPUTES_ASKED /* else the shim's BarrierState did, right after the cell */
        if (meta.bar_ahead == 1) {
            compute_asked();
        } else {
            ask_nobody();
        }
#endif
        if (meta.bar_verdict == BARRIER_ANSWER_RELEASE) {
            hdr.coll.op = OP_RELEASE;
            hdr.coll.src_node = meta.my_node; /* every RELEASE names the switch that sent it */
            meta.out_kind = OUT_REPLY;
        } else if (meta.bar_verdict == BARRIER_ADVANCE) {
            hdr.coll.src_node = meta.my_node;
            multicast_to(meta.bar_child_mask);
#ifndef NETCOLL_NO_BARRIER_ASKS /* a shim whose BarrierState never answers an ask */
        } else if (meta.bar_verdict == BARRIER_ASKED) {
            hdr.coll.src_node = meta.my_node;
            hdr.coll.flags = hdr.coll.flags & ~FLAG_RETRANSMIT; /* an answer asks nothing */
            if (barrier_missed_previous_release(meta.bar_ahead)) {
                /* this switch missed RELEASE(previous): release its subtree now */
                hdr.coll.op = OP_RELEASE;
                hdr.coll.epoch = hdr.coll.epoch - 1;
                multicast_to(meta.bar_child_mask);
            } else if (meta.bar_ahead != 1) {
                meta.drop_reason = DROP_STALE_RELEASE; /* released since */
            } else if (meta.bar_complete == 1) {
                meta.out_kind = OUT_REPLY; /* the ARRIVE the parent missed, up again */
            } else if (meta.missing_after != 0) {
                multicast_to(meta.missing_after); /* to the children missing */
            } else {
                meta.drop_reason = DROP_ABSORBED;
            }
#endif
        } else if (meta.bar_complete == 0 && repairs) {
            hdr.coll.dst_node = hdr.coll.src_node; /* the echo names the host it answers */
            hdr.coll.src_node = meta.my_node;
            /* only a resent ARRIVE asks: the children missing, and the echo with them */
            if (resent && meta.missing_after != 0) {
                if (from_host) {
                    multicast_to(meta.missing_after | meta.in_port_bit);
                } else {
                    multicast_to(meta.missing_after);
                }
            } else if (from_host) {
                meta.out_kind = OUT_REPLY;
            } else {
                meta.drop_reason = DROP_ABSORBED;
            }
        } else if (meta.bar_complete == 0) {
            meta.drop_reason = DROP_ABSORBED; /* recorded; waits for the other children */
        } else if (meta.bar_parent == 0) {
            /* the root saw every child: release the whole tree */
            hdr.coll.op = OP_RELEASE;
            hdr.coll.src_node = meta.my_node;
            multicast_to(meta.bar_child_mask);
        } else if (repairs && from_host) {
            /* complete here, or a duplicate after completion: (re)send one ARRIVE upward, and
             * to a host that asked, its echo with it (where the shim knows the parent's bit).
             * Nested tests: each gateway reads at most 4 bytes of fields. */
#ifndef NETCOLL_NO_PARENT_BIT
            if (meta.bar_parent_bit != 0) {
                hdr.coll.dst_node = hdr.coll.src_node;
                hdr.coll.src_node = meta.my_node;
                multicast_to(meta.bar_parent_bit | meta.in_port_bit);
            } else {
                send_up();
            }
#else
            send_up(); /* a shim without the parent's bit (always 0 there): no field for it */
#endif
        } else {
            send_up();
        }
    }
}

#endif /* NETCOLL_BARRIER_P4 */
