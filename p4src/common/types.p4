/* netcoll: type names shared by every file. */
#ifndef NETCOLL_TYPES_P4
#define NETCOLL_TYPES_P4

typedef bit<48> mac_addr_t;
typedef bit<16> node_id_t; /* hosts 1..0x3FFF, switches 0x4000.., management 0x7FFE */
typedef bit<16> comm_id_t;
typedef bit<16> epoch_t; /* compared with serial arithmetic (RFC 1982) */
typedef bit<16> port_num_t;
typedef bit<32> port_bitmap_t; /* bit (port - 1) set for each port in the set */

/* A barrier cell packs {epoch, generation} as a 32-bit tag over a 32-bit arrival bitmap, so one
 * read-modify-write updates both; on Tofino the two halves are the two 32-bit halves of one
 * dual-width register cell (p4src/tna/state.p4), updated by one RegisterAction. */
typedef bit<64> barrier_cell_t;

#endif /* NETCOLL_TYPES_P4 */
