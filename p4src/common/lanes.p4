/* netcoll: the lanes of a REDUCE/RESULT packet, enumerated by the preprocessor.
 *
 * NETCOLL_FOR_EACH_LANE(M) expands to M(0) M(1) ... M(NETCOLL_AGG_LANES - 1). A lane is a
 * field (agg_h.l<i>) and, on Tofino, a register of its own, so code per lane is written once as
 * a macro of the lane number and expanded here: the header, the v1model actions and the TNA
 * register programs all follow NETCOLL_AGG_LANES.
 */
#ifndef NETCOLL_LANES_P4
#define NETCOLL_LANES_P4

#include "constants.p4"

#define NETCOLL_LANES_0_7(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7)
#define NETCOLL_LANES_8_15(M) M(8) M(9) M(10) M(11) M(12) M(13) M(14) M(15)
#define NETCOLL_LANES_16_23(M) M(16) M(17) M(18) M(19) M(20) M(21) M(22) M(23)
#define NETCOLL_LANES_24_31(M) M(24) M(25) M(26) M(27) M(28) M(29) M(30) M(31)
#define NETCOLL_LANES_32_39(M) M(32) M(33) M(34) M(35) M(36) M(37) M(38) M(39)
#define NETCOLL_LANES_40_47(M) M(40) M(41) M(42) M(43) M(44) M(45) M(46) M(47)
#define NETCOLL_LANES_48_55(M) M(48) M(49) M(50) M(51) M(52) M(53) M(54) M(55)
#define NETCOLL_LANES_56_63(M) M(56) M(57) M(58) M(59) M(60) M(61) M(62) M(63)

#if NETCOLL_AGG_LANES == 8
#define NETCOLL_FOR_EACH_LANE(M) NETCOLL_LANES_0_7(M)
#elif NETCOLL_AGG_LANES == 16
#define NETCOLL_FOR_EACH_LANE(M) NETCOLL_LANES_0_7(M) NETCOLL_LANES_8_15(M)
#elif NETCOLL_AGG_LANES == 32
#define NETCOLL_FOR_EACH_LANE(M) NETCOLL_LANES_0_7(M) NETCOLL_LANES_8_15(M) \
    NETCOLL_LANES_16_23(M) NETCOLL_LANES_24_31(M)
#else
#define NETCOLL_FOR_EACH_LANE(M) NETCOLL_LANES_0_7(M) NETCOLL_LANES_8_15(M) \
    NETCOLL_LANES_16_23(M) NETCOLL_LANES_24_31(M) NETCOLL_LANES_32_39(M) \
    NETCOLL_LANES_40_47(M) NETCOLL_LANES_48_55(M) NETCOLL_LANES_56_63(M)
#endif

#endif /* NETCOLL_LANES_P4 */
