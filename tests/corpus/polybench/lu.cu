// SPDX-License-Identifier: BSD-3-Clause AND LicenseRef-PolyBench-OSU (PolyBench/ACC: University of Delaware, BSD-3-Clause; PolyBench: Ohio State University licence; both in LICENSE beside this file); origin: https://github.com/cavazos-lab/PolyBench-ACC/blob/70ea4ca9047dc4ec9c3ca79b4c91b3b2cc1510e7/CUDA/linear-algebra/solvers/lu/lu.cu
// From PolyBench/GPU 1.0, cavazos-lab/PolyBench-ACC (BSD-3-Clause (Univ. of Delaware) AND PolyBench/C licence (Ohio State Univ.); both in LICENSE beside this file), CUDA/linear-algebra/solvers/lu/lu.cu @ 70ea4ca9047d.
// Device code only, copied verbatim (line ranges below): the kernels, the whole .cuh (problem
// sizes: STANDARD_DATASET unless another *_DATASET is defined) and POLYBENCH_LOOP_BOUND from
// utilities/polybench.h. Host code and host-only/POSIX includes are left out.
// Left out of the copied lines: the host-only includes <time.h>, <stdarg.h>, which the kernels do
// not use and NVRTC cannot compile.

// ---- verbatim from CUDA/linear-algebra/solvers/lu/lu.cu, lines 1-9, 12, 15, 17
/**
 * lu.cu: This file is part of the PolyBench/GPU 1.0 test suite.
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

// ---- verbatim from CUDA/linear-algebra/solvers/lu/lu.cuh, lines 1-59
/**
 * lu.cuh: This file is part of the PolyBench/GPU 1.0 test suite.
 *
 *
 * Contact: Scott Grauer-Gray <sgrauerg@gmail.com>
 * Will Killian <killian@udel.edu>
 * Louis-Noel Pouchet <pouchet@cse.ohio-state.edu>
 * Web address: http://www.cse.ohio-state.edu/~pouchet/software/polybench/GPU
 */

#ifndef LU_CUH
# define LU_CUH

/* Default to STANDARD_DATASET. */
# if !defined(MINI_DATASET) && !defined(SMALL_DATASET) && !defined(LARGE_DATASET) && !defined(EXTRALARGE_DATASET)
#  define STANDARD_DATASET
# endif

/* Do not define anything if the user manually defines the size. */
# if !defined(N)
/* Define the possible dataset sizes. */
#  ifdef MINI_DATASET
#define N 512
#  endif

#  ifdef SMALL_DATASET
#define N 1024
#  endif

#  ifdef STANDARD_DATASET /* Default if unspecified. */
#define N 2048
#  endif

#  ifdef LARGE_DATASET
#define N 4096
#  endif

#  ifdef EXTRALARGE_DATASET
#define N 8192
#  endif
# endif /* !N */

# define _PB_N POLYBENCH_LOOP_BOUND(N,n)

# ifndef DATA_TYPE
#  define DATA_TYPE float
#  define DATA_PRINTF_MODIFIER "%0.2lf "
# endif

/* Thread block dimensions for kernel 1 */
#define DIM_THREAD_BLOCK_KERNEL_1_X 256
#define DIM_THREAD_BLOCK_KERNEL_1_Y 1

/* Thread block dimensions for kernel 2 */
#define DIM_THREAD_BLOCK_KERNEL_2_X 32
#define DIM_THREAD_BLOCK_KERNEL_2_Y 8


#endif /* !LU*/

// ---- verbatim from CUDA/linear-algebra/solvers/lu/lu.cu, lines 98-118
__global__ void lu_kernel1(int n, DATA_TYPE *A, int k)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	
	if ((j > k) && (j < _PB_N))
	{
		A[k*N + j] = A[k*N + j] / A[k*N + k];
	}
}


__global__ void lu_kernel2(int n, DATA_TYPE *A, int k)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	int i = blockIdx.y * blockDim.y + threadIdx.y;
	
	if ((i > k) && (j > k) && (i < _PB_N) && (j < _PB_N))
	{
		A[i*N + j] = A[i*N + j] - A[i*N + k] * A[k*N + j];
	}
}
