//! The trace and composition polynomials on the host, for the DEEP composition there.
//!
//! A proof on a GPU backend keeps the polynomials on the device and computes the DEEP composition
//! there; the host needs them only where the backend does not (it failed, it has no DEEP kernels,
//! or its memory budget did not let it keep a segment). A commitment that returned its
//! polynomials hands them over as they are; where it kept them on the device instead, they are
//! interpolated here, the first time they are needed, from the evaluations the commitment
//! started from, exactly as Winterfell computes them.

use std::sync::Arc;

use miden_crypto::Felt;
use winter_math::FieldElement;
use winter_prover::{
    matrix::ColMatrix, CompositionPoly, CompositionPolyTrace, StarkDomain, TracePolyTable,
};

use super::constraint_commitment::{CompositionPolys, EvaluateOnCpu};

/// A trace segment's polynomials, or the segment to interpolate them from.
pub(super) enum TracePolys<'a, E: FieldElement<BaseField = Felt>> {
    /// As the commitment returned them.
    Returned(ColMatrix<E>),
    /// Kept on the device: the segment's columns over the trace domain.
    Kept(&'a ColMatrix<E>),
}

impl<'a, E: FieldElement<BaseField = Felt>> TracePolys<'a, E> {
    /// The polynomials of a commitment of `segment` (`None`: kept on the device).
    pub fn new(polys: Option<ColMatrix<E>>, segment: &'a ColMatrix<E>) -> Self {
        polys.map_or(Self::Kept(segment), Self::Returned)
    }

    fn into_polys(self) -> ColMatrix<E> {
        match self {
            Self::Returned(polys) => polys,
            Self::Kept(segment) => segment.interpolate_columns(),
        }
    }
}

/// Every polynomial the DEEP composition reads, on the host once asked for.
pub(super) struct HostPolys<'a, E: FieldElement<BaseField = Felt>> {
    pending: Option<Pending<'a, E>>,
    ready: Option<(TracePolyTable<E>, ColMatrix<E>)>,
}

struct Pending<'a, E: FieldElement<BaseField = Felt>> {
    main: TracePolys<'a, Felt>,
    aux: Option<TracePolys<'a, E>>,
    composition: CompositionPolys<E>,
    num_columns: usize,
    domain: &'a StarkDomain<Felt>,
    evaluate_on_cpu: EvaluateOnCpu<'a, E>,
}

impl<'a, E: FieldElement<BaseField = Felt>> HostPolys<'a, E> {
    /// The polynomials of the main and auxiliary segments and of the composition polynomial's
    /// `num_columns` columns over `domain`; should the composition's evaluations be kept by a
    /// backend that cannot read them back, `evaluate_on_cpu` evaluates them again.
    pub fn new(
        main: TracePolys<'a, Felt>,
        aux: Option<TracePolys<'a, E>>,
        composition: CompositionPolys<E>,
        num_columns: usize,
        domain: &'a StarkDomain<Felt>,
        evaluate_on_cpu: EvaluateOnCpu<'a, E>,
    ) -> Self {
        let pending = Pending { main, aux, composition, num_columns, domain, evaluate_on_cpu };
        Self { pending: Some(pending), ready: None }
    }

    /// The trace polynomials and the composition columns, interpolated on the first call where
    /// the commitments kept them on the device.
    pub fn get(&mut self) -> (&TracePolyTable<E>, &ColMatrix<E>) {
        if let Some(pending) = self.pending.take() {
            let _span = tracing::info_span!("deep.host_polys").entered();
            let mut trace = TracePolyTable::new(pending.main.into_polys());
            if let Some(aux) = pending.aux {
                trace.add_aux_segment(aux.into_polys());
            }
            let composition = match pending.composition {
                CompositionPolys::Columns(columns) => columns,
                CompositionPolys::Evaluations(source) => {
                    let evaluations = match source.evaluations() {
                        // shared with a constraint commitment whose rows stay on the device
                        Ok(evaluations) => {
                            Arc::try_unwrap(evaluations).unwrap_or_else(|e| (*e).clone())
                        },
                        Err(error) => {
                            tracing::warn!(%error, "reading the composition failed; evaluating it again on the CPU");
                            (pending.evaluate_on_cpu)().into_inner()
                        },
                    };
                    let evaluations = CompositionPolyTrace::new(evaluations);
                    let poly =
                        CompositionPoly::new(evaluations, pending.domain, pending.num_columns);
                    ColMatrix::new(poly.into_columns())
                },
            };
            self.ready = Some((trace, composition));
        }
        let (trace, composition) = self.ready.as_ref().expect("set on the first call");
        (trace, composition)
    }
}
