// Student's t distribution: its CDF through the regularized incomplete beta function and
// its quantile by bisection on the CDF, for confidence intervals over a few seeds.
#pragma once

namespace fp8scope::stats {

// I_x(a, b), the regularized incomplete beta function, for a, b > 0 and x in [0, 1]
// (a continued fraction, evaluated by Lentz's method); NaN outside.
double incomplete_beta(double a, double b, double x);
// P(T <= t) for T with `dof` > 0 degrees of freedom.
double student_t_cdf(double t, double dof);
// The t with P(T <= t) = p, p in (0, 1); NaN outside or for dof <= 0.
double student_t_quantile(double p, double dof);

}  // namespace fp8scope::stats
