/* netcoll on TNA: the widths of the low parts of register and counter indices. */
#ifndef NETCOLL_TNA_INDEX_BITS_P4
#define NETCOLL_TNA_INDEX_BITS_P4

#include "../common/constants.p4"

/* Register indices come from the hash unit (an identity hash of the index's fields): a stateful
 * ALU is addressed by a hash or an action parameter, not by arithmetic. The index of a windowed
 * register is {slot, low bits of the epoch or chunk}, which equals the shared functions'
 * slot * WINDOW + (n & (WINDOW - 1)) since windows are powers of two and slots are range-checked
 * before any state is touched; the *_BITS below are those low bits' widths. */
#if NETCOLL_BARRIER_WINDOW == 2
#define TNA_BARRIER_WINDOW_BITS 1
#elif NETCOLL_BARRIER_WINDOW == 4
#define TNA_BARRIER_WINDOW_BITS 2
#elif NETCOLL_BARRIER_WINDOW == 8
#define TNA_BARRIER_WINDOW_BITS 3
#elif NETCOLL_BARRIER_WINDOW == 16
#define TNA_BARRIER_WINDOW_BITS 4
#elif NETCOLL_BARRIER_WINDOW == 32
#define TNA_BARRIER_WINDOW_BITS 5
#elif NETCOLL_BARRIER_WINDOW == 64
#define TNA_BARRIER_WINDOW_BITS 6
#elif NETCOLL_BARRIER_WINDOW == 128
#define TNA_BARRIER_WINDOW_BITS 7
#elif NETCOLL_BARRIER_WINDOW == 256
#define TNA_BARRIER_WINDOW_BITS 8
#else
#error "TNA: NETCOLL_BARRIER_WINDOW must be a power of two from 2 to 256"
#endif
#if NETCOLL_AGG_WINDOW == 2
#define TNA_AGG_WINDOW_BITS 1
#elif NETCOLL_AGG_WINDOW == 4
#define TNA_AGG_WINDOW_BITS 2
#elif NETCOLL_AGG_WINDOW == 8
#define TNA_AGG_WINDOW_BITS 3
#elif NETCOLL_AGG_WINDOW == 16
#define TNA_AGG_WINDOW_BITS 4
#elif NETCOLL_AGG_WINDOW == 32
#define TNA_AGG_WINDOW_BITS 5
#elif NETCOLL_AGG_WINDOW == 64
#define TNA_AGG_WINDOW_BITS 6
#elif NETCOLL_AGG_WINDOW == 128
#define TNA_AGG_WINDOW_BITS 7
#elif NETCOLL_AGG_WINDOW == 256
#define TNA_AGG_WINDOW_BITS 8
#else
#error "TNA: NETCOLL_AGG_WINDOW must be a power of two from 2 to 256"
#endif
#if NETCOLL_ACK_WINDOW == 2
#define TNA_ACK_WINDOW_BITS 1
#elif NETCOLL_ACK_WINDOW == 4
#define TNA_ACK_WINDOW_BITS 2
#elif NETCOLL_ACK_WINDOW == 8
#define TNA_ACK_WINDOW_BITS 3
#elif NETCOLL_ACK_WINDOW == 16
#define TNA_ACK_WINDOW_BITS 4
#elif NETCOLL_ACK_WINDOW == 32
#define TNA_ACK_WINDOW_BITS 5
#elif NETCOLL_ACK_WINDOW == 64
#define TNA_ACK_WINDOW_BITS 6
#elif NETCOLL_ACK_WINDOW == 128
#define TNA_ACK_WINDOW_BITS 7
#elif NETCOLL_ACK_WINDOW == 256
#define TNA_ACK_WINDOW_BITS 8
#else
#error "TNA: NETCOLL_ACK_WINDOW must be a power of two from 2 to 256"
#endif

#if NETCOLL_COUNTER_COLUMNS == 16
#define TNA_COUNTER_COLUMN_BITS 4 /* port_counter_index = {port, column} */
#else
#error "TNA: port_counter_index assumes 16 counter columns"
#endif

#endif /* NETCOLL_TNA_INDEX_BITS_P4 */
