//! The whole proof, step by step as winter-prover 0.13's `Prover::generate_proof` runs it, with
//! the DEEP composition and the FRI commit phase on the backend.
//!
//! winter-prover's own flow builds the DEEP polynomial and the FRI layers inside a provided
//! method, with its private channel, so [`GpuProver`] overrides `Prover::prove` with this copy.
//! Everything the AIR owns (public inputs, auxiliary trace) is still the wrapped prover's, and so
//! is the constraint evaluation where it does not run on the backend (`evaluation`); the transcript ([`ProverChannel`]) is reproduced exactly, so the proof is
//! byte-identical to Winterfell's.
//!
//! With the self-check on (the default), the finished proof is verified with winter-verifier
//! before it is returned: a backend that returns wrong data without an error yields a proof that
//! does not verify, which is then made again on the CPU (or, without the CPU fallback, is a
//! panic carrying [`GpuError::SelfCheckFailed`]).

use std::{borrow::Borrow, sync::Arc};

use miden_crypto::Felt;
use tracing::{info_span, warn};
use winter_air::{
    proof::{Queries, QuotientOodFrame, TraceOodFrame},
    Air, AuxRandElements, DeepCompositionCoefficients, FieldExtension,
};
use winter_crypto::{ElementHasher, MerkleTree};
use winter_fri::FriProof;
use winter_math::{
    fft,
    fields::{CubeExtension, QuadExtension},
    FieldElement, StarkField,
};
use winter_prover::{
    ConstraintCommitment, Proof, Prover, ProverError, StarkDomain, Trace, TraceLde,
};
use winter_verifier::{AcceptableOptions, VerifierError};

use super::{
    channel::ProverChannel,
    constraint_commitment::EvaluateOnCpu,
    deep::{deep_composition_poly, host_sum, ood_frames},
    evaluation::{cpu_lde, ConstraintPlacement, Traces},
    fri_proof::{build_fri_proof, remainder_poly},
    host_polys::{HostPolys, TracePolys},
    policy::{CommitterHandle, FallbackPolicy, Step},
    segment::base_components,
    spans, GpuConstraintCommitment, GpuProver, GpuTraceLde,
};
use crate::{
    committer::{
        deep::{CombineRequest, DeepSegment, EvaluateRequest},
        fri::{FriLayers, FriRequest, FriShape},
        GpuCommitter,
    },
    cpu::CpuCommitter,
    error::{FriError, GpuError, Result},
    hash::{Digest, GpuHasher},
};

/// Where a [`GpuProver`] runs the DEEP composition and the FRI commit phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FriPlacement {
    /// On the prover's backend (the CPU backend's FRI is winter-fri's own).
    #[default]
    Backend,
    /// On the CPU backend, whatever the commitments run on: for comparison, or as a fallback.
    Cpu,
}

type Channel<'a, P, E> = ProverChannel<'a, <P as Prover>::Air, E, <P as Prover>::RandomCoin>;

/// Where the work of one proof runs: the committer (with its fallback) and the FRI placement.
#[derive(Clone)]
pub(super) struct ProofSetup {
    /// The committer of the commitments (and of the DEEP and FRI steps on the backend).
    pub committer: CommitterHandle,
    /// Where the DEEP composition and the FRI commit phase run.
    pub fri_placement: FriPlacement,
    /// Where the constraints are evaluated.
    pub constraints: ConstraintPlacement,
}

impl ProofSetup {
    /// Everything on the CPU backend, with nothing to fall back to: the proof a self-check
    /// failure is answered with.
    fn cpu() -> Self {
        let committer = CommitterHandle::new(Arc::new(CpuCommitter::new()), FallbackPolicy::STRICT);
        Self { committer, fri_placement: FriPlacement::Cpu, constraints: ConstraintPlacement::Cpu }
    }
}

impl<P> GpuProver<P>
where
    P: Prover<BaseField = Felt>,
    P::HashFn: GpuHasher,
    P::RandomCoin: 'static,
{
    /// `Prover::prove`: the proof on the prover's backend, verified before it is returned when
    /// the self-check is on. A proof that does not verify is made again on the CPU with a
    /// warning if the CPU fallback is on, and is a panic carrying
    /// [`GpuError::SelfCheckFailed`] otherwise (the fallback-off path of every backend failure
    /// inside Winterfell's `Prover::prove`, which has no error for it).
    pub(super) fn prove_trace(&self, trace: P::Trace) -> core::result::Result<Proof, ProverError>
    where
        <P::Air as Air>::PublicInputs: Send,
    {
        let setup = self.setup();
        let policy = setup.committer.policy();
        if !policy.self_check {
            return self.prove_in_field(trace, &setup);
        }
        let proof = self.prove_in_field(&trace, &setup)?;
        let Err(reason) = self.verify(&trace, proof.clone()) else {
            return Ok(proof);
        };
        let backend = setup.committer.committer().backend();
        let error = GpuError::SelfCheckFailed { backend, reason: reason.to_string() };
        if !policy.cpu_fallback {
            panic!("{error}");
        }
        warn!(%backend, %error, "the proof does not verify; proving again on the CPU");
        let proof = self.prove_in_field(&trace, &ProofSetup::cpu())?;
        if let Err(reason) = self.verify(&trace, proof.clone()) {
            warn!(%reason, "the CPU's proof does not verify either: the trace does not satisfy \
                the AIR; returning it as Winterfell's prover would");
        }
        Ok(proof)
    }

    /// Verifies `proof` of `trace` with winter-verifier, accepting the prover's own options.
    fn verify(&self, trace: &P::Trace, proof: Proof) -> core::result::Result<(), VerifierError> {
        let _span = info_span!(spans::SELF_CHECK).entered();
        let acceptable = AcceptableOptions::OptionSet(vec![self.options().clone()]);
        winter_verifier::verify::<P::Air, P::HashFn, P::RandomCoin, MerkleTree<P::HashFn>>(
            proof,
            self.get_pub_inputs(trace),
            &acceptable,
        )
    }

    /// The proof of `trace` (held by value, so that it is freed once the DEEP composition no
    /// longer needs it, or borrowed) on `setup`, in the extension field the options ask for.
    fn prove_in_field<T>(
        &self,
        trace: T,
        setup: &ProofSetup,
    ) -> core::result::Result<Proof, ProverError>
    where
        T: Borrow<P::Trace>,
        <P::Air as Air>::PublicInputs: Send,
    {
        match self.options().field_extension() {
            FieldExtension::None => self.generate::<Felt, T>(trace, setup),
            FieldExtension::Quadratic => self.generate::<QuadExtension<Felt>, T>(trace, setup),
            FieldExtension::Cubic => self.generate::<CubeExtension<Felt>, T>(trace, setup),
        }
    }

    fn generate<E, T>(
        &self,
        trace: T,
        setup: &ProofSetup,
    ) -> core::result::Result<Proof, ProverError>
    where
        E: FieldElement<BaseField = Felt> + 'static,
        T: Borrow<P::Trace>,
        <P::Air as Air>::PublicInputs: Send,
    {
        // 0 ----- AIR and channel ----------------------------------------------------------------
        let pub_inputs = self.get_pub_inputs(trace.borrow());
        let pub_inputs_elements = winter_math::ToElements::to_elements(&pub_inputs);
        let air = P::Air::new(trace.borrow().info().clone(), pub_inputs, self.options().clone());
        let mut channel = Channel::<P, E>::new(&air, pub_inputs_elements);

        // 1 ----- trace commitments --------------------------------------------------------------
        let lde_domain_size = air.lde_domain_size();
        let trace_length = air.trace_length();
        let domain = info_span!("build_domain", trace_length, lde_domain_size)
            .in_scope(|| StarkDomain::new(&air));
        let keep_rows = self.constraints_on_backend::<E>(&air, setup);
        let (mut trace_lde, main_polys) = info_span!(spans::MAIN_TRACE).in_scope(|| {
            let (lde, polys) = GpuTraceLde::<E, P::HashFn>::build(
                trace.borrow().info(),
                trace.borrow().main_segment(),
                &domain,
                self.options().partition_options(),
                setup.committer.clone(),
                keep_rows,
            )
            .unwrap_or_else(|error| panic!("main trace commitment failed: {error}"));
            channel.commit_trace(lde.get_main_trace_commitment());
            (lde, polys)
        });
        let mut aux_trace = None;
        let mut aux_polys = None;
        let aux_rand_elements = if air.trace_info().is_multi_segment() {
            let rand_elements: AuxRandElements<E> = air
                .get_aux_rand_elements(channel.public_coin())
                .expect("failed to draw random elements for the auxiliary trace segment");
            let segment = self.build_aux_trace(trace.borrow(), &rand_elements);
            let _span = info_span!(spans::AUX_TRACE).entered();
            let (polys, aux_root) = trace_lde
                .commit_aux_segment(&segment, &domain)
                .unwrap_or_else(|error| panic!("auxiliary segment commitment failed: {error}"));
            channel.commit_trace(aux_root);
            (aux_trace, aux_polys) = (Some(segment), Some(polys));
            Some(rand_elements)
        } else {
            None
        };

        // 2 ----- constraint evaluation ----------------------------------------------------------
        let inputs = (aux_rand_elements, channel.get_constraint_composition_coeffs());
        let traces = Traces { main: trace.borrow().main_segment(), aux: aux_trace.as_ref() };
        let composition =
            self.evaluate_constraints(setup, &air, &trace_lde, traces, &domain, &inputs);
        // should the host need the composition and the backend that kept it cannot give it
        let evaluate_on_cpu = || self.cpu_composition(&air, traces, &domain, &inputs);

        // 3 ----- constraint commitment ----------------------------------------------------------
        let num_quotient_columns = air.context().num_constraint_composition_columns();
        let (mut constraint_commitment, composition_polys) = info_span!(spans::CONSTRAINTS)
            .in_scope(|| {
                let (commitment, polys) = GpuConstraintCommitment::<E, P::HashFn>::build(
                    composition,
                    num_quotient_columns,
                    &domain,
                    self.options().partition_options(),
                    &setup.committer,
                    &evaluate_on_cpu,
                );
                channel.commit_constraints(commitment.commitment());
                (commitment, polys)
            });

        // 4 ----- DEEP composition polynomial ----------------------------------------------------
        // the host's copies of the polynomials, needed only where the backend cannot compute it
        let aux =
            aux_trace.as_ref().zip(aux_polys).map(|(trace, polys)| TracePolys::new(polys, trace));
        let mut host_polys = HostPolys::new(
            TracePolys::new(main_polys, trace.borrow().main_segment()),
            aux,
            composition_polys,
            num_quotient_columns,
            &domain,
            &evaluate_on_cpu,
        );
        let main_width = trace_lde.main_segment().num_cols();
        let deep_poly = info_span!(spans::DEEP_BUILD).in_scope(|| {
            let z = channel.get_ood_point();
            let segments = self.resident_segments(setup, &trace_lde, &constraint_commitment);
            let (ood_trace, ood_quotients) = info_span!("deep.ood_frame").in_scope(|| {
                segments
                    .as_deref()
                    .and_then(|segments| self.ood_frames_on_backend(setup, segments, z, main_width))
                    .unwrap_or_else(|| {
                        let (trace_polys, composition) = host_polys.get();
                        ood_frames(trace_polys, composition, z)
                    })
            });
            channel.send_ood_evaluations(&ood_trace, &ood_quotients);
            let coefficients = channel.get_deep_composition_coeffs();
            let sum = info_span!("deep.combine").in_scope(|| {
                segments
                    .as_deref()
                    .and_then(|segments| self.deep_sum_on_backend(setup, segments, &coefficients))
                    .unwrap_or_else(|| {
                        let (trace_polys, composition) = host_polys.get();
                        host_sum(trace_polys, composition, &coefficients)
                    })
            });
            deep_composition_poly(sum, &ood_trace, &ood_quotients, &coefficients, z)
        });
        drop(host_polys);
        // rows kept on the device are read there for the queries; should that fail, the CPU
        // computes them from the traces
        let traces_for_queries = match trace_lde.kept_rows() {
            Some(_) => Some((aux_trace, trace)),
            None => {
                drop((aux_trace, trace));
                None
            },
        };
        trace_lde.release_resident_polys();
        constraint_commitment.release_resident_polys();
        debug_assert_eq!(trace_length - 2, winter_math::polynom::degree_of(&deep_poly));

        // 5, 6 ----- DEEP evaluations and FRI layers ---------------------------------------------
        let fri_options = air.options().to_fri_options();
        let num_layers = fri_options.num_fri_layers(lde_domain_size);
        let folding_factor = fri_options.folding_factor();
        let fri = info_span!(spans::FRI_LAYERS, num_layers).in_scope(|| {
            let (layers, drawn) = self
                .commit_fri_layers::<E>(setup, &deep_poly, num_layers, &mut channel)
                .unwrap_or_else(|error| panic!("FRI layer commitment failed: {error}"));
            let remainder = E::slice_from_base_elements(&layers.remainder);
            let remainder = remainder_poly(remainder, fri_options.blowup_factor());
            channel.commit_fri_layer(<P::HashFn as ElementHasher>::hash_elements(&remainder));
            CommittedFri { layers, drawn, remainder }
        });

        // 7 ----- query positions ----------------------------------------------------------------
        // the grinding and the queries' reads are short calls: held together, they do not each
        // wait behind another proof's commitment, and this proof ends sooner
        let devices = setup.committer.committer().hold_devices();
        let query_positions = info_span!(spans::QUERY_POSITIONS).in_scope(|| {
            let found = channel.grind_request().and_then(|request| {
                self.on_backend(setup, "grinding", |committer| committer.grind(&request))
            });
            channel.grind_query_seed(found);
            channel.get_query_positions()
        });

        // 8 ----- proof object -------------------------------------------------------------------
        let _span = info_span!(spans::PROOF_OBJECT).entered();
        let layer_rows: Vec<usize> =
            std::iter::successors(Some(lde_domain_size / folding_factor), |&rows| {
                Some(rows / folding_factor)
            })
            .take(num_layers)
            .collect();
        let fri_proof =
            self.open_fri_layers(setup, &fri, &deep_poly, &layer_rows, &query_positions);
        let cpu_traces = traces_for_queries
            .as_ref()
            .map(|(aux, trace)| Traces { main: trace.borrow().main_segment(), aux: aux.as_ref() });
        let trace_queries =
            self.trace_queries(setup, &air, &trace_lde, cpu_traces, &domain, &query_positions);
        let (air_ref, domain_ref, inputs_ref) = (&air, &domain, &inputs);
        let evaluate_on_cpu = cpu_traces
            .map(|traces| move || self.cpu_composition(air_ref, traces, domain_ref, inputs_ref));
        let constraint_queries = constraint_commitment
            .try_query(
                &query_positions,
                evaluate_on_cpu.as_ref().map(|f| f as EvaluateOnCpu<'_, E>),
            )
            .unwrap_or_else(|error| panic!("constraint queries failed: {error}"));
        // The LDEs and layers take gigabytes of host memory: freeing them need not delay the
        // proof. What holds the backend (its handle, layers kept on the device) is freed here: a
        // thread still releasing device memory when the process exits can crash in the driver.
        let FriLayers { layers: host_layers, kept, .. } = fri.layers;
        drop(kept);
        let host_memory = trace_lde.into_host_memory();
        std::thread::spawn(move || drop((host_memory, host_layers)));
        drop(devices);
        Ok(channel.build_proof(trace_queries, constraint_queries, fri_proof, query_positions.len()))
    }

    /// The trace rows at `positions` with their openings: read where the LDE is; should a read
    /// on the device fail, computed on the CPU from `traces` if the policy falls back.
    fn trace_queries<E: FieldElement<BaseField = Felt>>(
        &self,
        setup: &ProofSetup,
        air: &P::Air,
        trace_lde: &GpuTraceLde<E, P::HashFn>,
        traces: Option<Traces<'_, E>>,
        domain: &StarkDomain<Felt>,
        positions: &[usize],
    ) -> Vec<Queries> {
        let error = match trace_lde.try_query(positions) {
            Ok(queries) => return queries,
            Err(error) => error,
        };
        let (Some(traces), true) = (traces, setup.committer.policy().cpu_fallback) else {
            panic!("trace queries failed: {error}");
        };
        warn!(%error, "reading the trace rows failed; computing them again on the CPU");
        cpu_lde::<E, P::HashFn>(air, traces, domain, self.options().partition_options())
            .query(positions)
    }

    /// The segments whose polynomials the backend kept (main trace, auxiliary trace, composition
    /// polynomial), for the DEEP composition on the backend; `None` (the host computes it) when
    /// the DEEP composition stays on the CPU or a segment's polynomials were not kept.
    fn resident_segments<'a, E: FieldElement<BaseField = Felt>>(
        &self,
        setup: &ProofSetup,
        trace_lde: &'a GpuTraceLde<E, P::HashFn>,
        constraints: &'a GpuConstraintCommitment<E, P::HashFn>,
    ) -> Option<Vec<DeepSegment<'a>>> {
        if setup.fri_placement != FriPlacement::Backend {
            return None;
        }
        let degree = E::EXTENSION_DEGREE;
        let mut segments = Vec::with_capacity(3);
        for (s, polys) in trace_lde.resident_polys().iter().enumerate() {
            let polys = polys.as_ref()?;
            segments.push(DeepSegment { polys, degree: if s == 0 { 1 } else { degree } });
        }
        segments.push(DeepSegment { polys: constraints.resident_polys()?, degree });
        Some(segments)
    }

    /// The out-of-domain frame on the backend: every polynomial of `segments` at `z` and `gz`
    /// (the first `main_width` columns are the main trace's); `None` if the backend cannot.
    fn ood_frames_on_backend<E: FieldElement<BaseField = Felt>>(
        &self,
        setup: &ProofSetup,
        segments: &[DeepSegment<'_>],
        z: E,
        main_width: usize,
    ) -> Option<(TraceOodFrame<E>, QuotientOodFrame<E>)> {
        let n = segments[0].polys.poly_len();
        let gz = z * E::from(Felt::get_root_of_unity(n.ilog2()));
        let points = [z, gz];
        let request = EvaluateRequest {
            segments,
            ext_degree: E::EXTENSION_DEGREE,
            points: E::slice_as_base_elements(&points),
        };
        let columns: usize = segments.iter().map(|s| s.polys.num_cols() / s.degree).sum();
        let values = self.on_backend(setup, "the out-of-domain frame", |c| {
            let values = c.evaluate_polys(&request)?;
            expect_len(
                c,
                "evaluate_polys",
                "out-of-domain values",
                values,
                columns * 2 * E::EXTENSION_DEGREE,
            )
        })?;
        let values = E::slice_from_base_elements(&values);
        let (current, next): (Vec<E>, Vec<E>) =
            values.chunks_exact(2).map(|pair| (pair[0], pair[1])).unzip();
        let quotient_cols = segments.last()?.polys.num_cols() / E::EXTENSION_DEGREE;
        let trace_cols = current.len() - quotient_cols;
        let trace = TraceOodFrame::new(
            current[..trace_cols].to_vec(),
            next[..trace_cols].to_vec(),
            main_width,
        );
        let quotients =
            QuotientOodFrame::new(current[trace_cols..].to_vec(), next[trace_cols..].to_vec());
        Some((trace, quotients))
    }

    /// `S = Σ kᵢ·Tᵢ` on the backend over `segments`; `None` if the backend cannot.
    fn deep_sum_on_backend<E: FieldElement<BaseField = Felt>>(
        &self,
        setup: &ProofSetup,
        segments: &[DeepSegment<'_>],
        coefficients: &DeepCompositionCoefficients<E>,
    ) -> Option<Vec<E>> {
        let k: Vec<E> =
            coefficients.trace.iter().chain(&coefficients.constraints).copied().collect();
        let request = CombineRequest {
            segments,
            ext_degree: E::EXTENSION_DEGREE,
            coefficients: E::slice_as_base_elements(&k),
        };
        let poly_len = segments[0].polys.poly_len();
        let sum = self.on_backend(setup, "the DEEP combination", |c| {
            let sum = c.combine_polys(&request)?;
            expect_len(
                c,
                "combine_polys",
                "DEEP combination coefficients",
                sum,
                poly_len * E::EXTENSION_DEGREE,
            )
        })?;
        Some(E::slice_from_base_elements(&sum).to_vec())
    }

    /// Runs one step of the DEEP composition or the grinding on the backend under the policy
    /// ([`FallbackPolicy::run_step`]): `None` where the host computes it; panics with the typed
    /// error if it fails without fallback.
    fn on_backend<T>(
        &self,
        setup: &ProofSetup,
        step: &str,
        job: impl FnOnce(&dyn GpuCommitter) -> Result<T>,
    ) -> Option<T> {
        match setup.committer.run_step(step, job) {
            Ok(Step::Done(value)) => Some(value),
            Ok(Step::OnHost(_)) => None,
            Err(error) => panic!("{step} failed: {error}"),
        }
    }

    /// Evaluates the DEEP polynomial and commits to the FRI layers where [`FriPlacement`] says,
    /// drawing each layer's `alpha` from `channel`; returns them with the roots sent and the
    /// challenges drawn. A backend failure recomputes on the CPU, replaying the challenges already
    /// drawn for the roots already sent.
    fn commit_fri_layers<E: FieldElement<BaseField = Felt>>(
        &self,
        setup: &ProofSetup,
        deep_poly: &[E],
        num_layers: usize,
        channel: &mut Channel<'_, P, E>,
    ) -> Result<(FriLayers, Vec<Drawn>)> {
        let fri_options = self.options().to_fri_options();
        if num_layers == 0 {
            // The domain is no larger than the remainder's: the evaluations are the remainder.
            let twiddles = fft::get_twiddles::<Felt>(deep_poly.len());
            let evaluations = fft::evaluate_poly_with_offset(
                deep_poly,
                &twiddles,
                Felt::GENERATOR,
                fri_options.blowup_factor(),
            );
            let remainder = E::slice_as_base_elements(&evaluations).to_vec();
            return Ok((FriLayers { layers: Vec::new(), kept: None, remainder }, Vec::new()));
        }
        let components = base_components(deep_poly);
        let slices: Vec<&[Felt]> = components.iter().map(|c| c.as_ref()).collect();
        let request = FriRequest {
            keep_layers: setup.fri_placement == FriPlacement::Backend,
            ..fri_request::<P::HashFn>(&slices, &fri_options, num_layers)
        };
        let mut drawn: Vec<Drawn> = Vec::new();
        let mut draw = |root: Digest| -> Vec<Felt> {
            channel.commit_fri_layer(P::HashFn::from_digest(root));
            let alpha = channel.draw_fri_alpha();
            let components = E::slice_as_base_elements(&[alpha]).to_vec();
            drawn.push((root, components.clone()));
            components
        };
        let committer = match setup.fri_placement {
            FriPlacement::Backend => setup.committer.committer().as_ref(),
            FriPlacement::Cpu => &CpuCommitter::new(),
        };
        let committed = setup.committer.policy().run_step(committer, "the FRI layers", |c| {
            c.commit_fri(&request, &mut draw)
                .and_then(|layers| check_fri_layers(c, &request, layers))
        })?;
        let error = match committed {
            Step::Done(layers) => return Ok((layers, drawn)),
            Step::OnHost(error) => error,
        };

        // Replay: the roots sent so far must come out the same on the CPU; the layers after them
        // draw from the channel.
        let layers = replay_on_cpu(&request, &mut drawn, &error, |root| {
            channel.commit_fri_layer(P::HashFn::from_digest(root));
            E::slice_as_base_elements(&[channel.draw_fri_alpha()]).to_vec()
        })?;
        Ok((layers, drawn))
    }

    /// Opens the committed FRI layers at the query positions; if the backend fails to and may
    /// fall back, recomputes the layers of `deep_poly` (of `layer_rows` rows each) on the CPU
    /// from the challenges drawn and opens those.
    fn open_fri_layers<E: FieldElement<BaseField = Felt>>(
        &self,
        setup: &ProofSetup,
        fri: &CommittedFri<E>,
        deep_poly: &[E],
        layer_rows: &[usize],
        query_positions: &[usize],
    ) -> FriProof {
        let fri_options = self.options().to_fri_options();
        let folding = fri_options.folding_factor();
        let remainder = &fri.remainder;
        let open = |layers: &FriLayers| {
            build_fri_proof::<E, P::HashFn>(layers, layer_rows, remainder, folding, query_positions)
        };
        let error = match open(&fri.layers) {
            Ok(proof) => return proof,
            Err(error) if setup.committer.policy().cpu_fallback => error,
            Err(error) => panic!("FRI openings failed: {error}"),
        };
        warn!(%error, "backend failed; recomputing the FRI layers on the CPU to open them");
        let components = base_components(deep_poly);
        let slices: Vec<&[Felt]> = components.iter().map(|c| c.as_ref()).collect();
        let request = fri_request::<P::HashFn>(&slices, &fri_options, layer_rows.len());
        let mut drawn = fri.drawn.clone();
        let host = replay_on_cpu(&request, &mut drawn, &error, |_| {
            panic!("the CPU's FRI phase has more layers than the backend's")
        })
        .unwrap_or_else(|error| panic!("FRI layer commitment failed: {error}"));
        open(&host).unwrap_or_else(|error| panic!("FRI openings failed: {error}"))
    }
}

/// `values` if it holds `expected` elements; a [`GpuError::Device`] of `committer`'s `call`
/// otherwise: a result of the wrong size is a backend failure, never read.
fn expect_len<T>(
    committer: &dyn GpuCommitter,
    call: &'static str,
    what: &str,
    values: Vec<T>,
    expected: usize,
) -> Result<Vec<T>> {
    if values.len() == expected {
        return Ok(values);
    }
    let condition = format!("returned {} {what}, expected {expected}", values.len());
    Err(GpuError::internal(committer.backend(), call, condition))
}

/// `layers` if their count and remainder have the sizes `request` asks for; a
/// [`GpuError::Device`] of `committer` otherwise.
fn check_fri_layers(
    committer: &dyn GpuCommitter,
    request: &FriRequest<'_>,
    layers: FriLayers,
) -> Result<FriLayers> {
    let shape: FriShape = request.validate()?;
    let last = request.num_layers - 1;
    let remainder_len = shape.layer_rows(last, request.folding_factor) * shape.ext_degree;
    let host_layers = if layers.kept.is_some() { 0 } else { request.num_layers };
    if layers.layers.len() == host_layers && layers.remainder.len() == remainder_len {
        return Ok(layers);
    }
    let condition = format!(
        "returned {} FRI layers and {} remainder elements, expected {host_layers} and \
         {remainder_len}",
        layers.layers.len(),
        layers.remainder.len()
    );
    Err(GpuError::internal(committer.backend(), "commit_fri", condition))
}

/// The FRI request of the proof's options over the DEEP polynomial's components (layers
/// downloaded whole).
fn fri_request<'a, H: GpuHasher>(
    components: &'a [&'a [Felt]],
    fri_options: &winter_fri::FriOptions,
    num_layers: usize,
) -> FriRequest<'a> {
    FriRequest {
        components,
        blowup: fri_options.blowup_factor(),
        folding_factor: fri_options.folding_factor(),
        num_layers,
        hash: H::FUNCTION,
        keep_layers: false,
    }
}

/// A FRI layer root sent to the channel and the challenge it drew (base components).
type Drawn = (Digest, Vec<Felt>);

/// The FRI commit phase of a proof: the layers, the roots sent with the challenges they drew,
/// and the remainder polynomial.
struct CommittedFri<E> {
    layers: FriLayers,
    drawn: Vec<Drawn>,
    remainder: Vec<E>,
}

/// Recomputes the FRI layers of `request` on the CPU after the backend failed with `error`:
/// the roots in `drawn` must come out the same and get the challenges they drew; a later root
/// draws from `next`.
fn replay_on_cpu(
    request: &FriRequest<'_>,
    drawn: &mut Vec<Drawn>,
    error: &GpuError,
    mut next: impl FnMut(Digest) -> Vec<Felt>,
) -> Result<FriLayers> {
    let request = FriRequest { keep_layers: false, ..*request };
    let mut replay = drawn.clone().into_iter();
    let mut diverged = None;
    let layers = CpuCommitter::new().commit_fri(&request, &mut |root| match replay.next() {
        Some((sent, alpha)) => {
            if sent != root {
                diverged = Some(GpuError::InvalidFri(FriError::RootDiverged {
                    after: Box::new(error.clone()),
                }));
            }
            alpha
        },
        None => {
            let alpha = next(root);
            drawn.push((root, alpha.clone()));
            alpha
        },
    })?;
    diverged.map_or(Ok(layers), Err)
}
