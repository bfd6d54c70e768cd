// SPDX-License-Identifier: BSD-3-Clause AND LicenseRef-PolyBench-OSU (PolyBench/ACC: University of Delaware, BSD-3-Clause; PolyBench: Ohio State University licence; both in LICENSE beside this file); origin: https://github.com/cavazos-lab/PolyBench-ACC/blob/70ea4ca9047dc4ec9c3ca79b4c91b3b2cc1510e7/CUDA/linear-algebra/kernels/doitgen/doitgen.cu
// From PolyBench/GPU 1.0, cavazos-lab/PolyBench-ACC (BSD-3-Clause (Univ. of Delaware) AND PolyBench/C licence (Ohio State Univ.); both in LICENSE beside this file), CUDA/linear-algebra/kernels/doitgen/doitgen.cu @ 70ea4ca9047d.
// Device code only, copied verbatim (line ranges below): the kernels, the whole .cuh (problem
// sizes: STANDARD_DATASET unless another *_DATASET is defined) and POLYBENCH_LOOP_BOUND from
// utilities/polybench.h. Host code and host-only/POSIX includes are left out.
// Left out of the copied lines: the host-only includes <time.h>, <stdarg.h>, <cuda.h>, which the kernels do
// not use and NVRTC cannot compile.

// ---- verbatim from CUDA/linear-algebra/kernels/doitgen/doitgen.cu, lines 1-9, 12, 15, 17
/**
 * doitgen.cu: This file is part of the PolyBench/GPU 1.0 test suite.
 *
 *
 * Contact: Scott Grauer-Gray <sgrauerg@gmail.com>
 * Will Killian <killian@udel.edu>
 * Louis-Noel Pouchet <pouchet@cse.ohio-state.edu>
 * Web address: http://www.cse.ohio-state.edu/~pouchet/software/polybench/GPU
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- verbatim from CUDA/utilities/polybench.h, lines 44-50
/* Scalar loop bounds in SCoPs. By default, use parametric loop bounds. */
# ifdef POLYBENCH_USE_SCALAR_LB
#  define POLYBENCH_LOOP_BOUND(x,y) x
# else
/* default: */
#  define POLYBENCH_LOOP_BOUND(x,y) y
# endif

// ---- verbatim from CUDA/linear-algebra/kernels/doitgen/doitgen.cuh, lines 1-66
/**
 * doitgen.cuh: This file is part of the PolyBench/GPU 1.0 test suite.
 *
 *
 * Contact: Scott Grauer-Gray <sgrauerg@gmail.com>
 * Will Killian <killian@udel.edu>
 * Louis-Noel Pouchet <pouchet@cse.ohio-state.edu>
 * Web address: http://www.cse.ohio-state.edu/~pouchet/software/polybench/GPU
 */

#ifndef DOITGEN_CUH
# define DOITGEN_CUH

/* Default to STANDARD_DATASET. */
# if !defined(MINI_DATASET) && !defined(SMALL_DATASET) && !defined(LARGE_DATASET) && !defined(EXTRALARGE_DATASET)
#  define STANDARD_DATASET
# endif

/* Do not define anything if the user manually defines the size. */
# if !defined(NQ) && !defined(NR) && !defined(NP)
/* Define the possible dataset sizes. */
#  ifdef MINI_DATASET
#   define NQ 32
#   define NR 32
#   define NP 32
#  endif

#  ifdef SMALL_DATASET
#   define NQ 64
#   define NR 64
#   define NP 64
#  endif

#  ifdef STANDARD_DATASET /* Default if unspecified. */
#   define NQ 128
#   define NR 128
#   define NP 128
#  endif

#  ifdef LARGE_DATASET
#   define NQ 256
#   define NR 256
#   define NP 256
#  endif

#  ifdef EXTRALARGE_DATASET
#   define NQ 512
#   define NR 512
#   define NP 512
#  endif
# endif /* !N */

# define _PB_NQ POLYBENCH_LOOP_BOUND(NQ,nq)
# define _PB_NR POLYBENCH_LOOP_BOUND(NR,nr)
# define _PB_NP POLYBENCH_LOOP_BOUND(NP,np)

# ifndef DATA_TYPE
#  define DATA_TYPE float
#  define DATA_PRINTF_MODIFIER "%0.2lf "
# endif

/* Thread block dimensions */
#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8

#endif /* !DOITGEN */

// ---- verbatim from CUDA/linear-algebra/kernels/doitgen/doitgen.cu, lines 114-139
__global__ void doitgen_kernel1(int nr, int nq, int np, DATA_TYPE *sum, DATA_TYPE *A, DATA_TYPE *C4, int r)
{
	int p = blockIdx.x * blockDim.x + threadIdx.x;
	int q = blockIdx.y * blockDim.y + threadIdx.y;

	if ((p < np) && (q < nq))
	{
		sum[r * (nq * np) + q * np + p] = (DATA_TYPE)0.0;
	
		for (int s = 0; s < np; s++)
		{
			sum[r * (nq * np) + q * np + p] = sum[r * (nq * np) + q * np + p] + A[r * (nq * np) + q * np + s] * C4[s * np + p];
		}
	}
}

__global__ void doitgen_kernel2(int nr, int nq, int np, DATA_TYPE *sum, DATA_TYPE *A, DATA_TYPE *C4, int r)
{
	int p = blockIdx.x * blockDim.x + threadIdx.x;
	int q = blockIdx.y * blockDim.y + threadIdx.y;

	if ((p < np) && (q < nq))
	{
		A[r * (nq * np) + q * np + p] = sum[r * (nq * np) + q * np + p];
	}
}
