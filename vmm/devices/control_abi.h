/* The guest control device's register interface: shared by the VMM (C++) and the guest
 * payloads (freestanding C). Ports are 32-bit unless noted.
 *
 *   base+0  in   ID: reads VMMC_ID ("VMMC"); a missing device reads all ones
 *   base+0  out  COMMAND: performs a VMMC_CMD_* with the 64-bit ARG latched before
 *   base+4  out  ARG low 32 bits          base+4  in  CLOCK: latches the host's CLOCK_REALTIME
 *   base+8  out  ARG high 32 bits                          in ns, returns the low 32 bits
 *                                         base+8  in  the latched clock's high 32 bits
 *   base+12 out  MESSAGE (8-bit): one byte of a text line; '\n' ends the line
 *
 * ARG and the clock latch are per vCPU, so vCPUs may use the device at the same time.
 */
#ifndef VMM_DEVICES_CONTROL_ABI_H
#define VMM_DEVICES_CONTROL_ABI_H

#define VMMC_BASE 0x600
#define VMMC_PORTS 16
#define VMMC_ID 0x434d4d56u /* "VMMC" little-endian */

#define VMMC_REG_ID_CMD 0
#define VMMC_REG_ARG_LO_CLOCK_LO 4
#define VMMC_REG_ARG_HI_CLOCK_HI 8
#define VMMC_REG_MESSAGE 12

#define VMMC_CMD_PROGRESS 1  /* ARG: a counter that grows while the payload works */
#define VMMC_CMD_STEP 2      /* ARG: number of the step (pass) just completed */
#define VMMC_CMD_RESULT 3    /* ARG: a result value; the payload's check passed */
#define VMMC_CMD_ERROR 4     /* ARG: an error code; details went out as a MESSAGE line */
#define VMMC_CMD_MAX_PAUSE 5 /* ARG: the longest pause (ns) the guest has observed so far */
#define VMMC_CMD_SLEEP 6     /* ARG: ns to wait; the vCPU sleeps in the VMM, interruptible. The
                              * gap the VMM times to the next clock read starts where the sleep
                              * was due to end (the last read + ARG): only an overrun, e.g. a
                              * pause that landed in the sleep, counts, as a guest counts it */
#define VMMC_CMD_EXIT 7      /* ARG: exit code; the VMM stops the machine with it */

#endif
