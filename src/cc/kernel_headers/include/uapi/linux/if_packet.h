/* PyPerf kernel-header shim: included by libbcc's helpers.h; PyPerf uses no
 * packet socket definitions. */
