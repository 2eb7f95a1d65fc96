/* netcoll: membership updates carried by mini packets (MP).
 *
 * An MP names its target switch (dst_node) and a slot, and carries a generation. Switches on
 * the way forward it like unicast; host-facing ports drop every MP (Classify). At the target,
 * a generation newer than the slot's is applied, the same generation is answered DUPLICATE
 * (an idempotent resend), an older one is rejected STALE; every MP is answered with an
 * MP_REPLY out of the port it came in by, which leads back to the sender.
 */
#ifndef NETCOLL_MEMBERSHIP_P4
#define NETCOLL_MEMBERSHIP_P4

#include "constants.p4"
#include "headers.p4"

/* Serial comparison of 32-bit generations (RFC 1982): is the offered generation newer than the
 * stored one, given ahead = offered - stored? This alone decides whether an MP write is
 * applied, so a register update that cannot compute a status (Tofino's RegisterAction) uses
 * the same test as its condition and agrees with mp_generation_status. The caller subtracts
 * (in an action): a Tofino gateway tests a field, not a difference. */
bool generation_ahead_is_newer(in bit<32> ahead) {
    return ahead != 0 && ahead[31:31] == 0;
}

bit<8> mp_generation_status(in bit<32> ahead) {
    bit<8> status = MP_STATUS_STALE; /* if statements: Tofino's actions cannot test */
    if (ahead == 0) {
        status = MP_STATUS_DUPLICATE;
    } else if (generation_ahead_is_newer(ahead)) {
        status = MP_STATUS_OK;
    }
    return status;
}

/* Validate kind and slot before any register is indexed. */
control MembershipCheck(in headers_t hdr, inout coll_meta_t meta) {
#if defined(NETCOLL_MEMBERSHIP_TABLES) && !defined(NETCOLL_NO_MINI_PACKETS)
    /* The if statements below as one constant table (a shim's choice: each branch was a
     * table on Tofino, nine in all), first entry first; checked against the reference model
     * for every kind and the slots at both ends of each range by
     * tests/unit/test_tofino_membership_tables.py. */
    action admit(bit<8> state_op, bit<1> barrier) {
        meta.mp_status = MP_STATUS_OK;
        meta.state_op = state_op;
        meta.barrier_state_asked = barrier;
    }
    action refuse(bit<8> status) {
        meta.mp_status = status;
    }
    const bit<16> TREE_SLOT_LAST = NETCOLL_TREE_SLOTS - 1;
    const bit<16> COMM_SLOT_LAST = NETCOLL_COMM_SLOTS - 1;

    table mp_admission {
        key = {
            hdr.mp.kind : ternary @name("kind");
            hdr.mp.slot : range @name("slot");
        }
        actions = { admit; refuse; }
        const entries = {
            (MP_WRITE_TREE, 0 .. TREE_SLOT_LAST): admit(STATE_TREE_MP_WRITE, 0);
            (MP_READ_TREE, 0 .. TREE_SLOT_LAST): admit(STATE_TREE_MP_READ, 0);
            (MP_WRITE_TREE, _): refuse(MP_STATUS_BAD_SLOT);
            (MP_READ_TREE, _): refuse(MP_STATUS_BAD_SLOT);
            (MP_WRITE_BARRIER, 0 .. COMM_SLOT_LAST): admit(STATE_BARRIER_MP_WRITE, 1);
            (MP_READ_BARRIER, 0 .. COMM_SLOT_LAST): admit(STATE_BARRIER_MP_READ, 1);
            (MP_WRITE_BARRIER, _): refuse(MP_STATUS_BAD_SLOT);
            (MP_READ_BARRIER, _): refuse(MP_STATUS_BAD_SLOT);
        }
        const default_action = refuse(MP_STATUS_BAD_KIND);
    }

    apply {
        meta.state_slot = hdr.mp.slot; /* the row an admitted MP's state access indexes */
        mp_admission.apply();
    }
#else
    /* each outcome set once, where it is known: a field written and then overwritten costs
     * Tofino a stage, before the state access */
    apply {
#ifdef NETCOLL_NO_MINI_PACKETS
        /* a profile whose control plane writes the slots as register cells (Tofino 1's:
         * docs/porting-to-tofino.md): no MP kind is taken. An MP write put the barrier
         * slot's configuration a stage after its generation, for every barrier. */
        meta.mp_status = MP_STATUS_BAD_KIND;
#else
        /* the row an admitted MP's state access indexes */
        meta.state_slot = hdr.mp.slot;
        bit<8> kind = hdr.mp.kind;
        if (kind == MP_WRITE_TREE || kind == MP_READ_TREE) {
            if (hdr.mp.slot >= NETCOLL_TREE_SLOTS) {
                meta.mp_status = MP_STATUS_BAD_SLOT;
            } else if (kind == MP_WRITE_TREE) {
                meta.mp_status = MP_STATUS_OK;
                meta.state_op = STATE_TREE_MP_WRITE;
            } else {
                meta.mp_status = MP_STATUS_OK;
                meta.state_op = STATE_TREE_MP_READ;
            }
        } else if (kind == MP_WRITE_BARRIER || kind == MP_READ_BARRIER) {
            if (hdr.mp.slot >= NETCOLL_COMM_SLOTS) {
                meta.mp_status = MP_STATUS_BAD_SLOT;
            } else if (kind == MP_WRITE_BARRIER) {
                meta.mp_status = MP_STATUS_OK;
                meta.state_op = STATE_BARRIER_MP_WRITE;
                meta.barrier_state_asked = 1;
            } else {
                meta.mp_status = MP_STATUS_OK;
                meta.state_op = STATE_BARRIER_MP_READ;
                meta.barrier_state_asked = 1;
            }
        } else {
            meta.mp_status = MP_STATUS_BAD_KIND;
        }
#endif
    }
#endif /* NETCOLL_MEMBERSHIP_TABLES */
}

/* Answer a packet addressed to this switch: MP -> MP_REPLY, PING -> PONG. */
control LocalReply(inout headers_t hdr, inout coll_meta_t meta) {
    /* a reply goes back to whoever asked, from this switch, out of the port it came in */
    action turn_around() {
        hdr.coll.dst_node = hdr.coll.src_node;
        hdr.coll.src_node = meta.my_node;
        meta.out_kind = OUT_REPLY;
    }
#if defined(NETCOLL_MEMBERSHIP_TABLES) && !defined(NETCOLL_NO_MINI_PACKETS)
    /* The if statements below as one constant table (eight tables on Tofino), checked like
     * MembershipCheck's. An MP_REPLY that applied its MP leaves drop_reason as it was. */
    action pong() {
        turn_around();
        hdr.coll.op = OP_PONG;
    }
    action mp_reply() {
        turn_around();
        hdr.coll.op = OP_MP_REPLY;
        hdr.mp.status = meta.mp_status;
    }
    action mp_reply_counted(bit<8> reason) {
        mp_reply();
        meta.drop_reason = reason; /* counted, and the sender is told */
    }

    table reply_of {
        key = {
            hdr.coll.op : ternary @name("op");
            meta.mp_status : ternary @name("status");
        }
        actions = { pong; mp_reply; mp_reply_counted; }
        const entries = {
            (OP_PING, _): pong();
            (_, MP_STATUS_STALE): mp_reply_counted(DROP_MP_STALE);
            (_, MP_STATUS_DUPLICATE): mp_reply_counted(DROP_MP_DUPLICATE);
            (_, MP_STATUS_BAD_SLOT): mp_reply_counted(DROP_MP_BAD_SLOT);
            (_, MP_STATUS_BAD_KIND): mp_reply_counted(DROP_MP_BAD_KIND);
        }
        const default_action = mp_reply(); /* applied */
    }

    apply {
        reply_of.apply();
    }
#else
    apply {
        turn_around();
        if (hdr.coll.op == OP_PING) {
            hdr.coll.op = OP_PONG;
            return;
        }
        hdr.coll.op = OP_MP_REPLY;
        hdr.mp.status = meta.mp_status;
#ifdef NETCOLL_NO_MINI_PACKETS
        meta.drop_reason = DROP_MP_BAD_KIND; /* MembershipCheck takes no kind */
#else
        if (meta.mp_status == MP_STATUS_STALE) {
            meta.drop_reason = DROP_MP_STALE; /* counted, and the sender is told */
        } else if (meta.mp_status == MP_STATUS_DUPLICATE) {
            meta.drop_reason = DROP_MP_DUPLICATE;
        } else if (meta.mp_status == MP_STATUS_BAD_SLOT) {
            meta.drop_reason = DROP_MP_BAD_SLOT;
        } else if (meta.mp_status == MP_STATUS_BAD_KIND) {
            meta.drop_reason = DROP_MP_BAD_KIND;
        }
#endif
    }
#endif /* NETCOLL_MEMBERSHIP_TABLES */
}

#endif /* NETCOLL_MEMBERSHIP_P4 */
