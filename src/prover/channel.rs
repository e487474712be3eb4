//! The Fiat–Shamir transcript of a proof, as winter-prover 0.13's private `ProverChannel` keeps
//! it: the same public-coin seed, the same reseeding and drawing order, the same proof fields.

use std::{any::Any, marker::PhantomData};

use miden_crypto::rand::{RpoRandomCoin, RpxRandomCoin};

use winter_air::{
    proof::{merge_ood_evaluations, Commitments, Context, OodFrame, Proof, Queries},
    proof::{QuotientOodFrame, TraceOodFrame},
    Air, ConstraintCompositionCoefficients, DeepCompositionCoefficients,
};
use winter_crypto::{ElementHasher, RandomCoin};
use winter_fri::FriProof;
use winter_math::{FieldElement, ToElements};

use crate::{committer::grind::GrindRequest, hash::HashFunction};

// CHANNEL
// ================================================================================================

/// The prover's side of the interaction with the verifier.
pub(super) struct ProverChannel<'a, A, E, R>
where
    A: Air,
    E: FieldElement<BaseField = A::BaseField>,
    R: RandomCoin<BaseField = A::BaseField>,
{
    air: &'a A,
    public_coin: R,
    context: Context,
    commitments: Commitments,
    ood_frame: OodFrame,
    pow_nonce: u64,
    _element: PhantomData<E>,
}

type Digest<R> = <<R as RandomCoin>::Hasher as winter_crypto::Hasher>::Digest;

impl<'a, A, E, R> ProverChannel<'a, A, E, R>
where
    A: Air,
    E: FieldElement<BaseField = A::BaseField>,
    R: RandomCoin<BaseField = A::BaseField>,
{
    /// Seeds the public coin with the proof context and the public inputs.
    pub fn new(air: &'a A, mut pub_inputs_elements: Vec<A::BaseField>) -> Self {
        let num_constraints =
            air.context().num_assertions() + air.context().num_transition_constraints();
        let context = Context::new::<A::BaseField>(
            air.trace_info().clone(),
            air.options().clone(),
            num_constraints,
        );
        let mut seed = context.to_elements();
        seed.append(&mut pub_inputs_elements);
        Self {
            air,
            public_coin: RandomCoin::new(&seed),
            context,
            commitments: Commitments::default(),
            ood_frame: OodFrame::default(),
            pow_nonce: 0,
            _element: PhantomData,
        }
    }

    /// Records a trace segment's root and reseeds the coin with it.
    pub fn commit_trace(&mut self, root: Digest<R>) {
        self.commitments.add::<R::Hasher>(&root);
        self.public_coin.reseed(root);
    }

    /// Records the constraint commitment's root and reseeds the coin with it.
    pub fn commit_constraints(&mut self, root: Digest<R>) {
        self.commit_trace(root);
    }

    /// Records a FRI layer's root (or the remainder's hash) and reseeds the coin with it.
    pub fn commit_fri_layer(&mut self, root: Digest<R>) {
        self.commit_trace(root);
    }

    /// Draws a FRI folding challenge.
    pub fn draw_fri_alpha(&mut self) -> E {
        self.public_coin.draw().expect("failed to draw FRI alpha")
    }

    /// Records the out-of-domain frame and reseeds the coin with its hash.
    pub fn send_ood_evaluations(
        &mut self,
        trace: &TraceOodFrame<E>,
        constraints: &QuotientOodFrame<E>,
    ) {
        self.ood_frame.set_trace_states::<E>(trace);
        self.ood_frame.set_quotient_states::<E>(constraints);
        let evaluations = merge_ood_evaluations(trace, constraints);
        self.public_coin.reseed(R::Hasher::hash_elements(&evaluations));
    }

    /// The coin, for the AIR's auxiliary random elements.
    pub fn public_coin(&mut self) -> &mut R {
        &mut self.public_coin
    }

    /// Draws the constraint composition coefficients.
    pub fn get_constraint_composition_coeffs(&mut self) -> ConstraintCompositionCoefficients<E> {
        self.air
            .get_constraint_composition_coefficients(&mut self.public_coin)
            .expect("failed to draw composition coefficients")
    }

    /// Draws the out-of-domain point.
    pub fn get_ood_point(&mut self) -> E {
        self.public_coin.draw().expect("failed to draw OOD point")
    }

    /// Draws the DEEP composition coefficients.
    pub fn get_deep_composition_coeffs(&mut self) -> DeepCompositionCoefficients<E> {
        self.air
            .get_deep_composition_coefficients(&mut self.public_coin)
            .expect("failed to draw DEEP composition coefficients")
    }

    /// The proof-of-work search as a backend takes it, where the coin is one of miden-crypto's
    /// sponge coins (`RpoRandomCoin`, `RpxRandomCoin`); `None` for any other coin.
    pub fn grind_request(&self) -> Option<GrindRequest>
    where
        R: 'static,
    {
        let coin: &dyn Any = &self.public_coin;
        let (hash, state) = if let Some(coin) = coin.downcast_ref::<RpoRandomCoin>() {
            (HashFunction::Rpo256, coin.into_parts().0)
        } else if let Some(coin) = coin.downcast_ref::<RpxRandomCoin>() {
            (HashFunction::Rpx256, coin.into_parts().0)
        } else {
            return None;
        };
        let grinding_factor = self.context.options().grinding_factor();
        Some(GrindRequest { hash, state, grinding_factor })
    }

    /// Sets the proof-of-work nonce: `found` (a backend's search of [`Self::grind_request`],
    /// the first nonce) or else winter-prover's search, the first one or with `concurrent` any
    /// one.
    pub fn grind_query_seed(&mut self, found: Option<u64>) {
        if let Some(nonce) = found {
            self.pow_nonce = nonce;
            return;
        }
        let grinding_factor = self.context.options().grinding_factor();
        let coin = &self.public_coin;
        #[cfg(not(feature = "concurrent"))]
        let nonce = (1..u64::MAX).find(|&nonce| coin.check_leading_zeros(nonce) >= grinding_factor);
        #[cfg(feature = "concurrent")]
        let nonce = {
            use rayon::prelude::*;
            (1..u64::MAX)
                .into_par_iter()
                .find_any(|&nonce| coin.check_leading_zeros(nonce) >= grinding_factor)
        };
        self.pow_nonce = nonce.expect("nonce not found");
    }

    /// Draws the query positions, sorted and without repeats.
    pub fn get_query_positions(&mut self) -> Vec<usize> {
        let num_queries = self.context.options().num_queries();
        let lde_domain_size = self.context.lde_domain_size();
        let mut positions = self
            .public_coin
            .draw_integers(num_queries, lde_domain_size, self.pow_nonce)
            .expect("failed to draw query position");
        positions.sort_unstable();
        positions.dedup();
        positions
    }

    /// Assembles the proof.
    pub fn build_proof(
        self,
        trace_queries: Vec<Queries>,
        constraint_queries: Queries,
        fri_proof: FriProof,
        num_query_positions: usize,
    ) -> Proof {
        assert!(num_query_positions <= u8::MAX as usize, "num_query_positions too big");
        Proof {
            context: self.context,
            commitments: self.commitments,
            ood_frame: self.ood_frame,
            trace_queries,
            constraint_queries,
            fri_proof,
            pow_nonce: self.pow_nonce,
            num_unique_queries: num_query_positions as u8,
        }
    }
}
