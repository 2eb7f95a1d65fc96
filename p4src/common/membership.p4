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
}

/* Answer a packet addressed to this switch: MP -> MP_REPLY, PING -> PONG. */
control LocalReply(inout headers_t hdr, inout coll_meta_t meta) {
    apply {
        hdr.coll.dst_node = hdr.coll.src_node;
        hdr.coll.src_node = meta.my_node;
        meta.out_kind = OUT_REPLY;
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
}

#endif /* NETCOLL_MEMBERSHIP_P4 */
