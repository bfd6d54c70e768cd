// SPDX-License-Identifier: BSD-3-Clause AND LicenseRef-PolyBench-OSU (PolyBench/ACC: University of Delaware, BSD-3-Clause; PolyBench: Ohio State University licence; both in LICENSE beside this file); origin: https://github.com/cavazos-lab/PolyBench-ACC/blob/70ea4ca9047dc4ec9c3ca79b4c91b3b2cc1510e7/CUDA/linear-algebra/kernels/gemver/gemver.cu
// From PolyBench/GPU 1.0, cavazos-lab/PolyBench-ACC (BSD-3-Clause (Univ. of Delaware) AND PolyBench/C licence (Ohio State Univ.); both in LICENSE beside this file), CUDA/linear-algebra/kernels/gemver/gemver.cu @ 70ea4ca9047d.
// Device code only, copied verbatim (line ranges below): the kernels, the whole .cuh (problem
// sizes: STANDARD_DATASET unless another *_DATASET is defined) and POLYBENCH_LOOP_BOUND from
// utilities/polybench.h. Host code and host-only/POSIX includes are left out.
// Left out of the copied lines: the host-only includes <time.h>, <stdarg.h>, <cuda.h>, which the kernels do
// not use and NVRTC cannot compile.

// ---- verbatim from CUDA/linear-algebra/kernels/gemver/gemver.cu, lines 1-9, 12, 15, 17
/**
 * gemver.cu: This file is part of the PolyBench/GPU 1.0 test suite.
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

// ---- verbatim from CUDA/linear-algebra/kernels/gemver/gemver.cuh, lines 1-63
/**
 * gemver.cuh: This file is part of the PolyBench/GPU 1.0 test suite.
 *
 *
 * Contact: Scott Grauer-Gray <sgrauerg@gmail.com>
 * Will Killian <killian@udel.edu>
 * Louis-Noel Pouchet <pouchet@cse.ohio-state.edu>
 * Web address: http://www.cse.ohio-state.edu/~pouchet/software/polybench/GPU
 */

#ifndef GEMVER_CUH
# define GEMVER_CUH

/* Default to STANDARD_DATASET. */
# if !defined(MINI_DATASET) && !defined(SMALL_DATASET) && !defined(LARGE_DATASET) && !defined(EXTRALARGE_DATASET)
#  define STANDARD_DATASET
# endif

/* Do not define anything if the user manually defines the size. */
# if !defined(N)
/* Define the possible dataset sizes. */
#  ifdef MINI_DATASET
#define N 1024
#  endif

#  ifdef SMALL_DATASET
#define N 2048
#  endif

#  ifdef STANDARD_DATASET /* Default if unspecified. */
#define N 4096
#  endif

#  ifdef LARGE_DATASET
#define N 8192
#  endif

#  ifdef EXTRALARGE_DATASET
#define N 16384
#  endif
# endif /* !N */

# define _PB_N POLYBENCH_LOOP_BOUND(N,n)

# ifndef DATA_TYPE
#  define DATA_TYPE float
#  define DATA_PRINTF_MODIFIER "%0.2lf "
# endif

/* Thread block dimensions for kernel 1*/
#define DIM_THREAD_BLOCK_KERNEL_1_X 32
#define DIM_THREAD_BLOCK_KERNEL_1_Y 8

/* Thread block dimensions for kernel 2*/
#define DIM_THREAD_BLOCK_KERNEL_2_X 256
#define DIM_THREAD_BLOCK_KERNEL_2_Y 1

/* Thread block dimensions for kernel 3*/
#define DIM_THREAD_BLOCK_KERNEL_3_X 256
#define DIM_THREAD_BLOCK_KERNEL_3_Y 1


#endif /* !TWODCONV*/

// ---- verbatim from CUDA/linear-algebra/kernels/gemver/gemver.cu, lines 134-174
__global__ void gemver_kernel1(int n, DATA_TYPE alpha, DATA_TYPE beta, DATA_TYPE *a, DATA_TYPE *v1, DATA_TYPE *v2, DATA_TYPE *u1, DATA_TYPE *u2)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	int i = blockIdx.y * blockDim.y + threadIdx.y;

	if ((i < _PB_N) && (j < _PB_N))
	{
		a[i * N + j] += u1[i] * v1[j] + u2[i] * v2[j];
	}
}


__global__ void gemver_kernel2(int n, DATA_TYPE alpha, DATA_TYPE beta, DATA_TYPE *a, DATA_TYPE *x, DATA_TYPE *y, DATA_TYPE *z)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < _PB_N)
	{
		int j;
		for(j = 0; j < _PB_N; j++) 
		{
			x[i] += beta * a[j * N + i] * y[j];
		}
		x[i] += z[i];
	}
}


__global__ void gemver_kernel3(int n, DATA_TYPE alpha, DATA_TYPE beta, DATA_TYPE *a, DATA_TYPE *x, DATA_TYPE *w)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	
	if ((i >= 0) && (i < _PB_N))
	{
		int j;
		for(j = 0; j < _PB_N; j++)
		{ 
			w[i] += alpha * a[i*N + j] * x[j];
		}
	}
}
